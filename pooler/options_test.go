package pooler

import (
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/wire"
)

// TestSplitOptions: the options startup parameter splits as Postgres's
// pg_split_opts does: at whitespace, with a backslash escaping the next
// character (issue 18, cause 14: escaped spaces were refused).
func TestSplitOptions(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  -c a=b  ", []string{"-c", "a=b"}},
		{`-c application_name=hello\ world`, []string{"-c", "application_name=hello world"}},
		{`-csearch_path=a,\ b\\c`, []string{`-csearch_path=a, b\c`}},
		{"-c\ta=1\n--b=2", []string{"-c", "a=1", "--b=2"}},
		{`-c a=x\`, []string{"-c", "a=x"}},
		{`\ `, []string{" "}},
	} {
		if got := splitOptions(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("splitOptions(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// With "options" in ignore_startup_parameters the -c settings of tracked
// parameters still apply (PgBouncer's set_startup_options), the others are
// dropped instead of refused, and an argument that is not -c name=value is
// still refused.
func TestIgnoredOptionsStillSetTracked(t *testing.T) {
	cfg := config.Default()
	cfg.Settings.AuthType = "any"
	cfg.Settings.IgnoreStartupParameters = []string{"options"}
	svc, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	read := func(opts string) (map[string]string, error) {
		c := &client{svc: svc}
		params, _, err := c.readParams(&wire.Startup{Params: []wire.Param{{Name: "user", Value: "u"}, {Name: "options", Value: opts}}})
		return params, err
	}
	params, err := read(`-ctimezone=Europe/Lisbon  -c enable_seqscan=false -cdatestyle=German,\ YMD`)
	if err != nil {
		t.Fatal(err)
	}
	if params["TimeZone"] != "Europe/Lisbon" || params["DateStyle"] != "German, YMD" || len(params) != 2 {
		t.Errorf("params %v, want TimeZone and DateStyle only", params)
	}
	if _, err := read("-d"); err == nil || !strings.Contains(err.Error(), "only '-c config=val'") {
		t.Errorf(`options "-d": %v, want the refusal of a non -c argument`, err)
	}
}

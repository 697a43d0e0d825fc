package pooler

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/wire"
)

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

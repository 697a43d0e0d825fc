package pooler

import (
	"slices"
	"testing"
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

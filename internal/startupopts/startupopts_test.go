package startupopts

import (
	"slices"
	"testing"
)

// TestSplit: the options startup parameter splits as Postgres's
// pg_split_opts does: at whitespace, with a backslash escaping the next
// character (issue 18, cause 14: escaped spaces were refused).
func TestSplit(t *testing.T) {
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
		if got := Split(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Split(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Parse takes the three spellings of a setting, makes '-' '_' in a name,
// and stops at the first argument that is not a setting, with those
// before it.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Setting
		ok   bool
	}{
		{"", nil, true},
		{"-c a=1 -cb=2 --c-d=3", []Setting{{"a", "1"}, {"b", "2"}, {"c_d", "3"}}, true},
		{`-c application_name=a\ b=c`, []Setting{{"application_name", "a b=c"}}, true},
		{"-c a=1 -x", []Setting{{"a", "1"}}, false},
		{"-c a=1 -c", []Setting{{"a", "1"}}, false},
		{"-c=", nil, false},
		{"--=x", nil, false},
		{"-c a", nil, false},
	} {
		got, ok := Parse(tc.in)
		if !slices.Equal(got, tc.want) || ok != tc.ok {
			t.Errorf("Parse(%q) = %v %v, want %v %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

package pooler

import (
	"strings"
	"testing"
)

// TestAppendSetting: a list parameter is applied as set_config with the
// startup packet's text (SET search_path = 'a,b' would be the one schema
// "a,b"); PgBouncer's scalar ones keep its SET form; quotes and
// backslashes are escaped.
func TestAppendSetting(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"search_path", "app,public", "SELECT pg_catalog.set_config('search_path', 'app,public', false);"},
		{"search_path", `"Sp_Mixed", public`, `SELECT pg_catalog.set_config('search_path', '"Sp_Mixed", public', false);`},
		{"search_path", `o'hara`, `SELECT pg_catalog.set_config('search_path', 'o''hara', false);`},
		{"myapp.tenant", `a\b`, `SELECT pg_catalog.set_config('myapp.tenant', E'a\\b', false);`},
		{"DateStyle", "ISO, MDY", "SET DateStyle='ISO, MDY';"},
		{"application_name", "it's", "SET application_name='it''s';"},
	} {
		var sb strings.Builder
		appendSetting(&sb, tc.name, tc.value)
		if sb.String() != tc.want {
			t.Errorf("appendSetting(%q, %q) = %s, want %s", tc.name, tc.value, sb.String(), tc.want)
		}
	}
}

// TestSameSetting: reported values compare as PgBouncer compares them,
// without case, unless a quoted identifier makes case the meaning.
func TestSameSetting(t *testing.T) {
	for _, tc := range []struct {
		have, want string
		same       bool
	}{
		{"UTF8", "utf8", true},
		{`"Sp", public`, `"sp", public`, false},
		{`"Sp", public`, `"Sp", public`, true},
		{"ISO, MDY", "ISO", false},
	} {
		if got := sameSetting(tc.have, tc.want); got != tc.same {
			t.Errorf("sameSetting(%q, %q) = %v, want %v", tc.have, tc.want, got, tc.same)
		}
	}
}

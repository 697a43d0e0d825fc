package pgsetting

import (
	"maps"
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
		AppendSet(&sb, tc.name, tc.value)
		if sb.String() != tc.want {
			t.Errorf("AppendSet(%q, %q) = %s, want %s", tc.name, tc.value, sb.String(), tc.want)
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
		if got := Same(tc.have, tc.want); got != tc.same {
			t.Errorf("Same(%q, %q) = %v, want %v", tc.have, tc.want, got, tc.same)
		}
	}
}

// TestQuoteIdent: a plain name stays as it is, any other is quoted with
// its quotes doubled.
func TestQuoteIdent(t *testing.T) {
	for in, want := range map[string]string{
		"search_path": "search_path", "myapp.tenant": "myapp.tenant", "DateStyle": "DateStyle",
		"a b": `"a b"`, `x"y`: `"x""y"`, "": `""`, "é": `"é"`,
	} {
		if got := QuoteIdent(in); got != want {
			t.Errorf("QuoteIdent(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestKey: equal maps share a key whatever their order of insertion, and
// maps that differ do not, even where joining their texts would agree.
func TestKey(t *testing.T) {
	a := map[string]string{"TimeZone": "UTC", "application_name": "x"}
	b := map[string]string{"application_name": "x", "TimeZone": "UTC"}
	if Key(a) != Key(b) {
		t.Errorf("equal maps: %q and %q", Key(a), Key(b))
	}
	for _, m := range []map[string]string{
		{"a": "b:c"}, {"a:b": "c"}, {"a": "bc"}, {"ab": "c"}, {}, {"a": ""},
	} {
		for _, n := range []map[string]string{{"a": "b:c"}, {"a:b": "c"}, {"a": "bc"}, {"ab": "c"}, {}, {"a": ""}} {
			if Key(m) == Key(n) && !maps.Equal(m, n) {
				t.Errorf("%v and %v share key %q", m, n, Key(m))
			}
		}
	}
}

package sessionattrs

import (
	"errors"
	"fmt"
	"testing"
)

// libpq's rule, setting by setting: which of the four roles a server may
// have (read-write primary, read-only primary, standby) suits it.
func TestMismatch(t *testing.T) {
	type role struct{ readOnly, hotStandby bool }
	primary, readOnlyPrimary, standby := role{false, false}, role{true, false}, role{true, true}
	for _, c := range []struct {
		attrs string
		r     role
		want  string
	}{
		{"any", standby, ""},
		{"", readOnlyPrimary, ""},
		{"read-write", primary, ""},
		{"read-write", readOnlyPrimary, "session is read-only"},
		{"read-write", standby, "session is read-only"},
		{"read-only", primary, "session is not read-only"},
		{"read-only", readOnlyPrimary, ""},
		{"read-only", standby, ""},
		{"primary", primary, ""},
		{"primary", readOnlyPrimary, ""},
		{"primary", standby, "server is in hot standby mode"},
		{"standby", primary, "server is not in hot standby mode"},
		{"standby", standby, ""},
		{"prefer-standby", readOnlyPrimary, "server is not in hot standby mode"},
		{"prefer-standby", standby, ""},
	} {
		if got := Mismatch(c.attrs, c.r.readOnly, c.r.hotStandby); got != c.want {
			t.Errorf("Mismatch(%q, %+v) = %q; want %q", c.attrs, c.r, got, c.want)
		}
	}
}

// A server too old to report its role is asked about the one attrs needs.
func TestProbe(t *testing.T) {
	for attrs, want := range map[string]string{
		"read-write":     "SHOW transaction_read_only",
		"read-only":      "SHOW transaction_read_only",
		"primary":        "SELECT pg_catalog.pg_is_in_recovery()",
		"standby":        "SELECT pg_catalog.pg_is_in_recovery()",
		"prefer-standby": "SELECT pg_catalog.pg_is_in_recovery()",
	} {
		if got := Probe(attrs); got != want {
			t.Errorf("Probe(%q) = %q; want %q", attrs, got, want)
		}
	}
}

// NotMet's errors say why and are ErrNotMet, also wrapped.
func TestNotMet(t *testing.T) {
	err := fmt.Errorf("login: %w", NotMet("session is read-only (target_session_attrs=read-write)"))
	if !errors.Is(err, ErrNotMet) {
		t.Error("not ErrNotMet")
	}
	if err.Error() != "login: session is read-only (target_session_attrs=read-write)" {
		t.Errorf("text %q", err.Error())
	}
	if errors.Is(errors.New("target_session_attrs not met"), ErrNotMet) {
		t.Error("another error of the same text is ErrNotMet")
	}
}

//go:build linux

package main

import (
	"slices"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/config"
)

// TestOverloadPolicy: the policy the overload scenario hands pgturnstile is
// one the pooler's own parser accepts, and it means what the report says.
func TestOverloadPolicy(t *testing.T) {
	p, err := config.ParseAdmission([]byte(overloadPolicy), "admission.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Priorities, []string{"high", "low"}) || p.DefaultPriority != 0 {
		t.Errorf("priorities %q, default %d; want high, low and 0 (high)", p.Priorities, p.DefaultPriority)
	}
	if p.ShortTimeout != 5*time.Millisecond || p.LongTimeout != 100*time.Millisecond {
		t.Errorf("short_timeout %v, long_timeout %v; want 5ms and 100ms", p.ShortTimeout, p.LongTimeout)
	}
	if len(p.Rules) != 1 {
		t.Fatalf("%d rules, want 1", len(p.Rules))
	}
	if r := p.Rules[0]; r.ApplicationName != "batch-*" || r.Priority != 1 || r.User != "" || r.Database != "" {
		t.Errorf("rule %+v; want application_name batch-* → tier 1 (low)", r)
	}
	if p.ShedSQLState != sqlstateShed {
		t.Errorf("shed SQLSTATE %q, want %q", p.ShedSQLState, sqlstateShed)
	}
}

package main

import (
	"slices"
	"testing"

	"github.com/pgturnstile/pgturnstile/config"
)

// TestOverloadPolicy: the policy the overload scenario hands pgturnstile is
// one the pooler's own parser accepts, and it means what the report says.
func TestOverloadPolicy(t *testing.T) {
	p, err := config.ParseAdmission([]byte(overloadPolicy), "admission.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Priorities, []string{"critical", "high", "medium", "low"}) || p.DefaultPriority != 1 {
		t.Errorf("priorities %q, default %d; want critical..low, 1 (high)", p.Priorities, p.DefaultPriority)
	}
	if len(p.Rules) != 1 {
		t.Fatalf("%d rules, want 1", len(p.Rules))
	}
	if r := p.Rules[0]; r.ApplicationName != "batch-*" || r.Priority != 3 || r.User != "" || r.Database != "" {
		t.Errorf("rule %+v; want application_name batch-* → tier 3 (low)", r)
	}
	if p.ShedSQLState != sqlstateShed {
		t.Errorf("shed SQLSTATE %q, want %q", p.ShedSQLState, sqlstateShed)
	}
}

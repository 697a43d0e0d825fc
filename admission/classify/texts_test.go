package classify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/admission"
)

// Load reads and compiles a file; a policy the compiler refuses is named
// by its file.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "admission.toml")
	if err := os.WriteFile(good, []byte(testPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := Load(good)
	if err != nil {
		t.Fatal(err)
	}
	if p.Tiers() != 4 || p.PriorityName(p.DefaultPriority()) != "high" {
		t.Errorf("loaded %d tiers, default %s", p.Tiers(), p.PriorityName(p.DefaultPriority()))
	}
	if _, err := Load(filepath.Join(dir, "missing.toml")); err == nil || !strings.Contains(err.Error(), "cannot load admission file") {
		t.Errorf("a missing file: %v", err)
	}
}

func TestCategoryLabel(t *testing.T) {
	p := mustPolicy(t, testPolicy)
	if got := p.CategoryLabel(3); got != "source=batch" {
		t.Errorf("leaf 3: %q", got)
	}
	flat := mustPolicy(t, "[priorities]\nnames = [\"a\", \"b\"]\ndefault = \"a\"\n")
	if got := flat.CategoryLabel(0); got != "default" {
		t.Errorf("the single leaf: %q", got)
	}
}

// A shed's DETAIL is key=value words by the policy's names.
func TestShedDetail(t *testing.T) {
	p := mustPolicy(t, testPolicy)
	e := &admission.ShedError{Reason: admission.ReasonLIFOTimeout, Class: admission.Class{Priority: 3, Leaf: 3},
		Waited: 12 * time.Millisecond, RetryAfter: 250 * time.Millisecond}
	want := "reason=lifo_timeout priority=low category=source=batch waited_ms=12 retry_after_ms=250"
	if got := p.ShedDetail(e); got != want {
		t.Errorf("%q\nwant %q", got, want)
	}
}

// Each issue's NOTICE says what was done with the option, and what the
// policy takes instead.
func TestOptionNotice(t *testing.T) {
	p := mustPolicy(t, testPolicy)
	for _, tc := range []struct {
		is          OptionIssue
		msg, detail string
	}{
		{OptionIssue{Reason: IssueUnknownKey, Key: "tier", Value: "x"},
			"unknown admission option pgturnstile.tier ignored", "The keys are priority, category, source, endpoint."},
		{OptionIssue{Reason: IssueBadPriority, Key: "priority", Value: "urgent"},
			"admission option pgturnstile.priority=urgent names no priority, ignored", "The priorities are critical, high, medium, low."},
		{OptionIssue{Reason: IssueClampedPriority, Key: "priority", Value: "critical", Max: "high"},
			"admission priority critical is above the allowed high, lowered to high", ""},
	} {
		msg, detail := p.OptionNotice(tc.is)
		if msg != tc.msg || detail != tc.detail {
			t.Errorf("%s: %q / %q\nwant %q / %q", tc.is.Reason, msg, detail, tc.msg, tc.detail)
		}
	}
}

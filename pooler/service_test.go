package pooler

import (
	"io"
	"log/slog"
	"testing"

	"github.com/pgturnstile/pgturnstile/config"
)

// newTestService builds a Service on the default configuration, without
// listeners; nothing is started.
func newTestService(t *testing.T, opts ...Option) *Service {
	t.Helper()
	cfg := config.Default()
	cfg.Settings.AuthType = "any"
	svc, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// SHOW VERSION reports what the command passed to New, and a default
// without it: there is no process-wide variable to set.
func TestWithVersion(t *testing.T) {
	if got := newTestService(t).Console().Version(); got != "pgturnstile" {
		t.Errorf("default Version() = %q, want %q", got, "pgturnstile")
	}
	const v = "PgBouncer 1.25.0 (pgturnstile test)"
	if got := newTestService(t, WithVersion(v)).Console().Version(); got != v {
		t.Errorf("Version() = %q, want %q", got, v)
	}
}

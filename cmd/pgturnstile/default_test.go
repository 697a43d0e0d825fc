package main

import (
	"slices"
	"testing"
)

// The embedded default config (--dev-backend, and make run's pgbouncer.ini)
// lets a newcomer try the admin console as user admin (SET USER, RELOAD)
// and /metrics, on a port no registered Prometheus exporter uses (9127 is
// pgbouncer_exporter's).
func TestDefaultConfigHasConsoleAndMetrics(t *testing.T) {
	cfg, err := devConfig("127.0.0.1:15432")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cfg.Settings.AdminUsers, "admin") {
		t.Errorf("admin_users %v, want admin", cfg.Settings.AdminUsers)
	}
	if cfg.Settings.MetricsAddr != "127.0.0.1:6490" {
		t.Errorf("metrics_addr %q, want 127.0.0.1:6490", cfg.Settings.MetricsAddr)
	}
}

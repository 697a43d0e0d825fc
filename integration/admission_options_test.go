//go:build linux

package integration

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Admission startup options the policy ignores or changes are not silent:
// an unknown key and a priority above the user's max_priority each get a
// NOTICE at login, counted by reason; a level of the tree by its name and
// category= are taken without one.
func TestAdmissionOptionNotices(t *testing.T) {
	p := startAdmissionPooler(t, fairPolicy+"\n[users.app]\nmax_priority = \"low\"\n", nil)
	login := func(options string) []*pgconn.Notice {
		var mu sync.Mutex
		var got []*pgconn.Notice
		cfg := pgxConfig(t, p.App())
		cfg.RuntimeParams["options"] = options
		cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
			mu.Lock()
			got = append(got, n)
			mu.Unlock()
		}
		conn, err := tryConnectPgx(t, cfg)
		if err != nil {
			t.Fatalf("login with options %q: %v", options, err)
		}
		queryInt(t, conn, "SELECT 1")
		conn.Close(ctxT(t, 5*time.Second))
		mu.Lock()
		defer mu.Unlock()
		return got
	}
	if ns := login("-c pgturnstile.tenant=a -c pgturnstile.category=b -c pgturnstile.priority=low"); len(ns) != 0 {
		t.Errorf("known keys: NOTICEs %v", ns)
	}
	ns := login("-c pgturnstile.tennant=a -c pgturnstile.priority=high")
	var msgs []string
	for _, n := range ns {
		if n.Severity != "NOTICE" || n.Code != "00000" {
			t.Errorf("NOTICE %+v", n)
		}
		msgs = append(msgs, n.Message+" | "+n.Detail)
	}
	want := []string{
		"unknown admission option pgturnstile.tennant ignored | The keys are priority, category, tenant.",
		"admission priority high is above the allowed low, lowered to low | ",
	}
	if strings.Join(msgs, "\n") != strings.Join(want, "\n") {
		t.Errorf("NOTICEs:\n%s\nwant:\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}
	for reason, n := range map[string]float64{"unknown_key": 1, "clamped_priority": 1, "bad_priority": 0} {
		series := `pgturnstile_admission_option_notices_total{database="appdb",user="app",reason="` + reason + `"}`
		if got := admissionMetrics(t, p, series); got != n {
			t.Errorf("%s = %v, want %v", series, got, n)
		}
	}
}

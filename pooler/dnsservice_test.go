package pooler

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/internal/dnscache/dnstest"
)

// A server host name is dialled through the DNS cache: SHOW DNS_HOSTS
// lists it, and when its new answer lacks the address a server is
// connected to, that server is marked close_needed.
func TestDNSCacheServesServerLogins(t *testing.T) {
	fake := startFakePostgres(t)
	res := dnstest.New()
	res.Set("pg.example.internal", "127.0.0.1")
	tp := startTestPooler(t, fake, map[string]string{"cs": "host=pg.example.internal"}, "",
		func(s *Service) { s.dns = s.newDNSCache(res) })
	defer tp.shutdown(t, fake)
	conn, _ := dialStateClient(t, tp)
	defer conn.Close()
	stateQuery(t, conn, "SELECT 1", 'I')
	if n := res.Count("pg.example.internal"); n != 1 {
		t.Fatalf("%d lookups, want 1", n)
	}
	hosts := tp.svc.Console().(admin.DNSCache).DNSHosts()
	if len(hosts) != 1 || hosts[0].Hostname != "pg.example.internal" || hosts[0].Addrs != "127.0.0.1:0" || hosts[0].TTL <= 0 {
		t.Fatalf("DNS_HOSTS %+v", hosts)
	}
	if l := tp.svc.Console().Lists(); l.DNSNames != 1 || l.DNSZones != 1 {
		t.Errorf("SHOW LISTS dns_names %d dns_zones %d, want 1 1", l.DNSNames, l.DNSZones)
	}

	closeNeeded := func() (n int) {
		for _, p := range tp.svc.allPools() {
			p.mu.Lock()
			for s := range p.servers {
				if s.closeNeeded {
					n++
				}
			}
			p.mu.Unlock()
		}
		return n
	}
	if n := closeNeeded(); n != 0 {
		t.Fatalf("%d servers close_needed before any change", n)
	}
	// The zone's serial moves on: the name is looked up again at once,
	// without a login, and its server on the address that left is marked.
	res.Set("pg.example.internal", "127.0.0.2")
	tp.svc.soa = func(context.Context, string) (uint32, error) { return 3, nil }
	tp.svc.checkZones(context.Background())
	if n := res.Count("pg.example.internal"); n != 2 {
		t.Errorf("%d lookups after the zone changed, want 2", n)
	}
	if n := closeNeeded(); n != 1 {
		t.Errorf("%d servers close_needed after their address left the answer, want 1", n)
	}

	// A name that does not resolve: PgBouncer's warning, and the login's
	// reason.
	res.Forget("pg.example.internal")
	tp.svc.dns.ExpireZone("example.internal")
	if _, err := tp.svc.dns.Resolve(context.Background(), "pg.example.internal"); err == nil {
		t.Fatal("no error for a name that does not resolve")
	}
	if !strings.Contains(tp.log.tail(), "DNS lookup failed: pg.example.internal: result=-2") {
		t.Errorf("log:\n%s", tp.log.tail())
	}
}

// A resolv_conf that cannot be read stops the start.
func TestResolvConfMissing(t *testing.T) {
	cfg := parseTestConfig(t, "[databases]\n[pgbouncer]\nauth_type = any\nresolv_conf = "+filepath.Join(t.TempDir(), "missing")+"\n")
	if _, err := New(cfg, nil); err == nil || !strings.HasPrefix(err.Error(), "resolv_conf: open ") {
		t.Errorf("missing resolv_conf: %v", err)
	}
}

// dns_zone_check_period: a zone whose serial moved on has its names
// looked up again at their next use, with PgBouncer's log line; the same
// serial changes nothing.
func TestDNSZoneCheck(t *testing.T) {
	svc := newTestService(t)
	lg := &captureLog{}
	svc.log = slog.New(&captureHandler{log: lg})
	res := dnstest.New()
	res.Set("db.example.com", "10.0.0.1")
	svc.dns = svc.newDNSCache(res)
	serial := uint32(7)
	svc.soa = func(_ context.Context, zone string) (uint32, error) {
		if zone != "example.com" {
			return 0, fmt.Errorf("unexpected zone %q", zone)
		}
		return serial, nil
	}
	ctx := context.Background()
	svc.dns.Resolve(ctx, "db.example.com")
	svc.checkZones(ctx)
	if !strings.Contains(lg.tail(), "zone 'example.com' serial changed: old=0 new=7") {
		t.Errorf("log:\n%s", lg.tail())
	}
	svc.dns.Resolve(ctx, "db.example.com")
	if n := res.Count("db.example.com"); n != 2 {
		t.Errorf("%d lookups after the serial changed, want 2", n)
	}
	svc.checkZones(ctx)
	svc.dns.Resolve(ctx, "db.example.com")
	if n := res.Count("db.example.com"); n != 2 {
		t.Errorf("%d lookups with the serial unchanged, want 2", n)
	}
	if z := svc.Console().(admin.DNSCache).DNSZones(); len(z) != 1 || z[0].Serial != 7 {
		t.Errorf("DNS_ZONES %+v", z)
	}
}

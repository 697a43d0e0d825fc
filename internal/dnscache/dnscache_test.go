package dnscache

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/internal/dnscache/dnstest"
)

// fakeNow is a settable time.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeNow) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeNow) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func testDNSCache(res Resolver, okTTL, failTTL time.Duration) (*Cache, *fakeNow) {
	clk := &fakeNow{t: time.Unix(1_000_000, 0)}
	return New(res, clk.now, func() (time.Duration, time.Duration) { return okTTL, failTTL }), clk
}

func addrStrings(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

// An answer is kept dns_max_ttl and each resolve starts at the next
// address; a failure is kept dns_nxdomain_ttl, as a *net.DNSError.
func TestDNSCacheTTLs(t *testing.T) {
	res := dnstest.New()
	res.Set("db.example.com", "10.0.0.1", "10.0.0.2", "10.0.0.3")
	d, clk := testDNSCache(res, 15*time.Second, 5*time.Second)
	ctx := context.Background()
	var order []string
	for range 4 {
		as, err := d.Resolve(ctx, "db.example.com")
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, addrStrings(as))
	}
	want := []string{"10.0.0.1,10.0.0.2,10.0.0.3", "10.0.0.2,10.0.0.3,10.0.0.1", "10.0.0.3,10.0.0.1,10.0.0.2", "10.0.0.1,10.0.0.2,10.0.0.3"}
	if !slices.Equal(order, want) {
		t.Errorf("rotation %q, want %q", order, want)
	}
	if n := res.Count("db.example.com"); n != 1 {
		t.Errorf("%d lookups within dns_max_ttl, want 1", n)
	}
	clk.add(14 * time.Second)
	d.Resolve(ctx, "db.example.com")
	if n := res.Count("db.example.com"); n != 1 {
		t.Errorf("%d lookups at 14 s, want 1", n)
	}
	clk.add(2 * time.Second)
	d.Resolve(ctx, "db.example.com")
	if n := res.Count("db.example.com"); n != 2 {
		t.Errorf("%d lookups after dns_max_ttl, want 2", n)
	}

	for range 2 {
		_, err := d.Resolve(ctx, "gone.example.com")
		var de *net.DNSError
		if !errors.As(err, &de) || !de.IsNotFound {
			t.Fatalf("failed lookup: %v, want a not-found *net.DNSError", err)
		}
	}
	if n := res.Count("gone.example.com"); n != 1 {
		t.Errorf("%d lookups of a failed name within dns_nxdomain_ttl, want 1", n)
	}
	res.Set("gone.example.com", "10.0.0.9")
	clk.add(6 * time.Second)
	if as, err := d.Resolve(ctx, "gone.example.com"); err != nil || addrStrings(as) != "10.0.0.9" {
		t.Errorf("after dns_nxdomain_ttl: %v %v", as, err)
	}

	// 0 keeps nothing.
	d0, _ := testDNSCache(res, 0, 0)
	d0.Resolve(ctx, "db.example.com")
	d0.Resolve(ctx, "db.example.com")
	if n := res.Count("db.example.com"); n != 4 {
		t.Errorf("dns_max_ttl = 0: %d lookups in all, want 4", n)
	}
}

// Logins that need a name while it is looked up share that lookup.
func TestDNSCacheOneLookupInFlight(t *testing.T) {
	res := dnstest.New()
	res.Set("db.example.com", "10.0.0.1")
	release := res.Hold()
	d, _ := testDNSCache(res, 0, 0)
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := d.Resolve(context.Background(), "db.example.com")
			errs <- err
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		// One lookup in flight and the four other logins waiting on
		// it (with dns_max_ttl = 0 a login that came after the lookup
		// would make its own).
		d.mu.Lock()
		h := d.hosts["db.example.com"]
		n := d.pending
		waiting := h != nil && h.waiters == 4
		d.mu.Unlock()
		if waiting && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no lookup started")
		}
		time.Sleep(time.Millisecond)
	}
	if _, _, q := d.Counts(); q != 1 {
		t.Errorf("dns_queries = %d during the lookup, want 1", q)
	}
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := res.Count("db.example.com"); n != 1 {
		t.Errorf("%d lookups for 5 concurrent logins, want 1", n)
	}
}

// A new answer that lacks an address reports it; SHOW DNS_HOSTS and
// DNS_ZONES list the names and zones as PgBouncer does.
func TestDNSCacheRowsAndGoneAddresses(t *testing.T) {
	res := dnstest.New()
	res.Set("db1.example.com", "10.0.0.1", "::1")
	res.Set("db2.example.com", "10.0.0.2")
	res.Set("localhost", "127.0.0.1")
	d, clk := testDNSCache(res, 15*time.Second, 15*time.Second)
	var gone []string
	d.AddrGone = func(host string, a netip.Addr) { gone = append(gone, host+" "+a.String()) }
	ctx := context.Background()
	for _, h := range []string{"db1.example.com", "db2.example.com", "localhost"} {
		d.Resolve(ctx, h)
	}
	clk.add(5 * time.Second)
	hosts := d.HostRows()
	wantHosts := []admin.DNSHost{
		{Hostname: "db1.example.com", TTL: 10, Addrs: "10.0.0.1:0,[::1]:0"},
		{Hostname: "db2.example.com", TTL: 10, Addrs: "10.0.0.2:0"},
		{Hostname: "localhost", TTL: 10, Addrs: "127.0.0.1:0"},
	}
	if !slices.Equal(hosts, wantHosts) {
		t.Errorf("DNS_HOSTS %+v, want %+v", hosts, wantHosts)
	}
	if z := d.ZoneRows(); !slices.Equal(z, []admin.DNSZone{{Zonename: "example.com", Count: 2}}) {
		t.Errorf("DNS_ZONES %+v", z)
	}
	if n, z, _ := d.Counts(); n != 3 || z != 1 {
		t.Errorf("dns_names %d dns_zones %d", n, z)
	}

	res.Set("db1.example.com", "10.0.0.5", "::1")
	clk.add(20 * time.Second)
	if h := d.HostRows()[0]; h.TTL != 0 {
		t.Errorf("an expired answer shows ttl %d, want 0", h.TTL)
	}
	d.Resolve(ctx, "db1.example.com")
	if !slices.Equal(gone, []string{"db1.example.com 10.0.0.1"}) {
		t.Errorf("addresses reported gone: %q", gone)
	}
}

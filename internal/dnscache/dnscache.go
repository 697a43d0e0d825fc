// Package dnscache is the DNS cache of server host names: PgBouncer's
// dnslookup.c in Go terms, for a pooler's server logins, with what keeps
// it true: the resolver resolv_conf names and the zones' SOA serials that
// dns_zone_check_period asks (zone.go), and the dial through it (dial.go).
package dnscache

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
)

// The cache, in PgBouncer's terms:
//
//   - A name is looked up once and its answer kept dns_max_ttl (the
//     record's own TTL is ignored, as PgBouncer does); a failed lookup is
//     kept dns_nxdomain_ttl, and logins to the name fail at once with
//     "server DNS lookup failed" meanwhile. 0 keeps nothing.
//   - Logins that need a name while it is being looked up wait for that
//     one lookup rather than start their own.
//   - Each login starts at the next address of the answer (PgBouncer
//     rotates through them), so the servers of a name with several
//     addresses spread over them. Where PgBouncer tries only that one,
//     the dial here goes on to the others if it cannot connect, as Go's
//     dialer did before the cache.
//   - When a new answer lacks an address the last one had (a DNS
//     failover), the servers connected to that address are marked
//     close_needed (PgBouncer's tag_host_addr_dirty).
//   - Every name with a dot registers its zone (what follows the first
//     dot) for dns_zone_check_period (the pooler's zone check).
//   - A failed lookup is logged as PgBouncer's warning, "DNS lookup
//     failed: NAME: result=N", N getaddrinfo's code (EAI_NONAME -2 for a
//     name that does not exist, EAI_AGAIN -3 for a timeout, EAI_FAIL -4
//     for anything else).
//
// SHOW DNS_HOSTS lists the names, SHOW DNS_ZONES the zones, and SHOW
// LISTS counts both.

// Resolver looks a host name up (net.Resolver; a fake in tests).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Cache is the cache; its fields after mu are under it.
type Cache struct {
	res Resolver
	now func() time.Time
	// ttls returns dns_max_ttl and dns_nxdomain_ttl in force.
	ttls func() (ok, failed time.Duration)
	// AddrGone is told of each address a new answer for host lacks;
	// Failed of each lookup that failed. Either may be nil.
	AddrGone func(host string, addr netip.Addr)
	Failed   func(host string, err *net.DNSError)

	mu      sync.Mutex
	hosts   map[string]*hostEntry
	zones   map[string]*zoneEntry
	pending int // lookups in flight
}

// hostEntry is one name's entry.
type hostEntry struct {
	name string
	// done is set once a lookup has answered; addrs or err is its answer,
	// valid until expires.
	done    bool
	addrs   []netip.Addr
	err     error
	expires time.Time
	next    int // the address the next login starts at
	// wait is closed when the lookup in flight ends; nil when none is.
	// waiters counts the logins waiting on it (the tests wait for them).
	wait    chan struct{}
	waiters int
	zone    *zoneEntry
}

// zoneEntry is a zone whose serial dns_zone_check_period follows.
type zoneEntry struct {
	name   string
	serial uint32
	hosts  []*hostEntry
}

func New(res Resolver, now func() time.Time, ttls func() (time.Duration, time.Duration)) *Cache {
	return &Cache{res: res, now: now, ttls: ttls, hosts: map[string]*hostEntry{}, zones: map[string]*zoneEntry{}}
}

// Resolve returns the addresses to try for host, the next in turn first.
// A lookup error is a *net.DNSError (the pooler's "server DNS lookup
// failed").
func (d *Cache) Resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	d.mu.Lock()
	h := d.hosts[host]
	if h == nil {
		h = &hostEntry{name: host}
		d.hosts[host] = h
		d.registerZoneLocked(h)
	}
	waited := false
	for {
		if h.wait != nil {
			wait := h.wait
			h.waiters++
			d.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				d.mu.Lock()
				h.waiters--
				d.mu.Unlock()
				return nil, &net.DNSError{Err: "lookup timed out", Name: host, IsTimeout: true}
			}
			d.mu.Lock()
			h.waiters--
			waited = true
			continue
		}
		// The answer of a lookup just waited for is taken even if its
		// TTL (0) has run out: one lookup serves the logins that came
		// during it.
		if !h.done || !(waited || d.now().Before(h.expires)) {
			if err := d.lookupRelock(ctx, h); err != nil {
				d.mu.Unlock()
				return nil, err
			}
		}
		defer d.mu.Unlock()
		if h.err != nil {
			return nil, h.err
		}
		return h.rotateLocked(), nil
	}
}

// rotateLocked returns h's addresses starting at the one in turn, and
// moves the turn on.
func (h *hostEntry) rotateLocked() []netip.Addr {
	n := len(h.addrs)
	i := h.next % n
	h.next = (i + 1) % n
	out := make([]netip.Addr, 0, n)
	out = append(out, h.addrs[i:]...)
	return append(out, h.addrs[:i]...)
}

// lookupRelock looks h up with d.mu released, and records the answer. A
// lookup cut short by ctx (the login's timeout) is not an answer: nothing
// is cached, the error is returned, and the next login looks again.
func (d *Cache) lookupRelock(ctx context.Context, h *hostEntry) error {
	wait := make(chan struct{})
	h.wait = wait
	d.pending++
	d.mu.Unlock()
	addrs, err := d.res.LookupNetIP(ctx, "ip", h.name)
	if err == nil && len(addrs) == 0 {
		err = &net.DNSError{Err: "no such host", Name: h.name, IsNotFound: true}
	}
	var de *net.DNSError
	if err != nil && !errors.As(err, &de) {
		de = &net.DNSError{Err: err.Error(), Name: h.name}
		err = de
	}
	for i, a := range addrs {
		addrs[i] = a.Unmap()
	}
	var gone []netip.Addr
	d.mu.Lock()
	d.pending--
	h.wait = nil
	close(wait)
	if ctx.Err() != nil && err != nil {
		return err
	}
	ok, failed := d.ttls()
	h.done = true
	if err != nil {
		h.err, h.expires = err, d.now().Add(failed)
	} else {
		for _, a := range h.addrs {
			if !slices.Contains(addrs, a) {
				gone = append(gone, a)
			}
		}
		h.addrs, h.err, h.expires = addrs, nil, d.now().Add(ok)
		if h.next >= len(addrs) {
			h.next = 0
		}
	}
	if (len(gone) > 0 && d.AddrGone != nil) || (err != nil && d.Failed != nil) {
		d.mu.Unlock()
		for _, a := range gone {
			d.AddrGone(h.name, a)
		}
		if err != nil && d.Failed != nil {
			d.Failed(h.name, de)
		}
		d.mu.Lock()
	}
	return nil
}

// registerZoneLocked files h under its zone, as PgBouncer's zone_register:
// what follows the first dot, if anything does.
func (d *Cache) registerZoneLocked(h *hostEntry) {
	i := strings.IndexByte(h.name, '.')
	if i < 0 || i == len(h.name)-1 {
		return
	}
	name := h.name[i+1:]
	z := d.zones[strings.ToLower(name)]
	if z == nil {
		z = &zoneEntry{name: name}
		d.zones[strings.ToLower(name)] = z
	}
	z.hosts = append(z.hosts, h)
	h.zone = z
}

// ExpireZone ends the answers of zone's names, after its serial changed,
// and returns the names, which the zone check then looks up again at once
// (PgBouncer's zone_requeue), so that servers on an address that left are
// marked even while no login needs the name.
func (d *Cache) ExpireZone(zone string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	z := d.zones[strings.ToLower(zone)]
	if z == nil {
		return nil
	}
	var names []string
	for _, h := range z.hosts {
		if h.done {
			h.expires = time.Time{}
			names = append(names, h.name)
		}
	}
	return names
}

// HostRows is SHOW DNS_HOSTS: each name, the seconds its answer has left
// (0 once expired, as PgBouncer shows a stale one) and its addresses as
// PgBouncer's sa2str writes them (port 0: the lookup has none).
func (d *Cache) HostRows() []admin.DNSHost {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]admin.DNSHost, 0, len(d.hosts))
	for _, h := range d.hosts {
		var ttl int64
		if h.done && h.expires.After(now) {
			ttl = int64(h.expires.Sub(now) / time.Second)
		}
		addrs := make([]string, len(h.addrs))
		for i, a := range h.addrs {
			addrs[i] = netip.AddrPortFrom(a, 0).String()
		}
		out = append(out, admin.DNSHost{Hostname: h.name, TTL: ttl, Addrs: strings.Join(addrs, ",")})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Hostname < out[j].Hostname })
	return out
}

// ZoneRows is SHOW DNS_ZONES: each zone, the last serial seen (0 before
// the first check) and how many names it holds.
func (d *Cache) ZoneRows() []admin.DNSZone {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]admin.DNSZone, 0, len(d.zones))
	for _, z := range d.zones {
		out = append(out, admin.DNSZone{Zonename: z.name, Serial: int64(z.serial), Count: len(z.hosts)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Zonename < out[j].Zonename })
	return out
}

// Counts is SHOW LISTS' dns_names, dns_zones and dns_queries (lookups in
// flight; dns_pending is 0, as in PgBouncer).
func (d *Cache) Counts() (names, zones, queries int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.hosts), len(d.zones), d.pending
}

// ZoneNames lists the zones, for the zone check.
func (d *Cache) ZoneNames() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.zones))
	for _, z := range d.zones {
		out = append(out, z.name)
	}
	sort.Strings(out)
	return out
}

// NoteSerial records zone's serial and returns the one before; changed
// when it moved on (serial arithmetic, as PgBouncer: the first one seen
// Counts as a change).
func (d *Cache) NoteSerial(zone string, serial uint32) (old uint32, changed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	z := d.zones[strings.ToLower(zone)]
	if z == nil {
		return 0, false
	}
	old = z.serial
	if int32(serial-z.serial) <= 0 {
		return old, false
	}
	z.serial = serial
	return old, true
}

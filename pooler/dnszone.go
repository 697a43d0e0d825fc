package pooler

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/pgturnstile/pgturnstile/internal/sockopt"
)

// resolv_conf and dns_zone_check_period.
//
// Go's resolver reads /etc/resolv.conf and cannot be pointed at another
// file. With resolv_conf set, its nameserver lines are used: the resolver
// (Go's own, not the C library's) sends its queries to them instead of
// the system's, through net.Resolver.Dial. Search domains and options
// still come from /etc/resolv.conf, and /etc/hosts is read first.
//
// dns_zone_check_period is PgBouncer's c-ares zone check: every period,
// the SOA serial of each zone of the cached names is asked, one
// zone after another; when a serial moved on, the zone's names are looked
// up again at once, and servers connected to an address that disappeared
// are marked close_needed (Service.addrGone). Go's resolver has no
// SOA lookup: the query is sent here, over UDP, to the nameservers of
// resolv_conf or else of /etc/resolv.conf.

// systemResolvConf is where the system's nameservers are listed.
const systemResolvConf = "/etc/resolv.conf"

// readNameservers returns the nameserver lines of a resolv.conf as
// host:53 addresses.
func readNameservers(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			out = append(out, net.JoinHostPort(fields[1], "53"))
		}
	}
	return out, sc.Err()
}

// newResolver is the resolver of the DNS cache: Go's default one, or with
// resolv_conf one whose queries go to that file's nameservers, taken in
// turn at each attempt (the resolver retries on the next).
func newResolver(resolvConf string) (*net.Resolver, error) {
	if resolvConf == "" {
		return net.DefaultResolver, nil
	}
	servers, err := readNameservers(resolvConf)
	if err != nil {
		return nil, fmt.Errorf("resolv_conf: %w", err)
	}
	if len(servers) == 0 {
		return nil, fmt.Errorf("resolv_conf: no nameserver in %s", resolvConf)
	}
	var turn atomic.Uint32
	var d net.Dialer
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			i := int(turn.Add(1)-1) % len(servers)
			return d.DialContext(ctx, network, servers[i])
		},
	}, nil
}

// soaSerial asks the nameservers for zone's SOA serial, over UDP.
func soaSerial(ctx context.Context, servers []string, zone string) (uint32, error) {
	name, err := dnsmessage.NewName(strings.TrimSuffix(zone, ".") + ".")
	if err != nil {
		return 0, err
	}
	id := uint16(rand.Uint32())
	q := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: id, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: name, Type: dnsmessage.TypeSOA, Class: dnsmessage.ClassINET}},
	}
	packet, err := q.Pack()
	if err != nil {
		return 0, err
	}
	lastErr := errors.New("no nameserver")
	for _, srv := range servers {
		serial, err := soaAsk(ctx, srv, packet, id)
		if err == nil {
			return serial, nil
		}
		lastErr = err
	}
	return 0, lastErr
}

func soaAsk(ctx context.Context, server string, packet []byte, id uint16) (uint32, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", server)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	c.SetDeadline(deadline)
	if _, err := c.Write(packet); err != nil {
		return 0, err
	}
	buf := make([]byte, 1232)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return 0, err
		}
		var m dnsmessage.Message
		if err := m.Unpack(buf[:n]); err != nil || m.ID != id || !m.Response {
			continue // not the answer to this query
		}
		if m.RCode != dnsmessage.RCodeSuccess {
			return 0, fmt.Errorf("rcode %v", m.RCode)
		}
		for _, a := range m.Answers {
			if soa, ok := a.Body.(*dnsmessage.SOAResource); ok {
				return soa.Serial, nil
			}
		}
		return 0, errors.New("no SOA in the answer")
	}
}

// zoneCheckDue starts a pass of the zone check when dns_zone_check_period
// has passed since the last one began and none is running; the janitor
// asks at each tick, so RELOAD and SET start, stop and change the period.
// The pass runs on its own goroutine: it waits on the network.
func (s *Service) zoneCheckDue(ctx context.Context, now time.Time) {
	period := s.settings().DNSZoneCheckPeriod
	if period <= 0 || now.Sub(s.zoneCheckLast) < period || !s.zoneChecking.CompareAndSwap(false, true) {
		return
	}
	s.zoneCheckLast = now
	// Not in s.wg: a pass ends with ctx (the janitor's) or its queries'
	// 5 s bound.
	go func() {
		defer s.zoneChecking.Store(false)
		s.checkZones(ctx)
	}()
}

// checkZones asks each zone's serial in turn and has the names of those
// that changed looked up again, with PgBouncer's log lines.
func (s *Service) checkZones(ctx context.Context) {
	for _, zone := range s.dns.ZoneNames() {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		serial, err := s.soa(qctx, zone)
		cancel()
		if err != nil {
			if s.debugOn() {
				s.log.Debug(fmt.Sprintf("failure to get zone '%s' serial", zone))
			}
			continue
		}
		old, changed := s.dns.NoteSerial(zone, serial)
		if !changed {
			if s.debugOn() {
				s.log.Debug(fmt.Sprintf("zone '%s' unchanged: serial=%d", zone, serial))
			}
			continue
		}
		s.log.Info(fmt.Sprintf("zone '%s' serial changed: old=%d new=%d", zone, old, serial))
		for _, name := range s.dns.ExpireZone(zone) {
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			s.dns.Resolve(lctx, name)
			cancel()
		}
	}
}

// dnsFailed logs a failed lookup as PgBouncer does, with getaddrinfo's
// code for the failure.
func (s *Service) dnsFailed(host string, err *net.DNSError) {
	code := -4 // EAI_FAIL
	switch {
	case err.IsNotFound:
		code = -2 // EAI_NONAME
	case err.IsTimeout || err.IsTemporary:
		code = -3 // EAI_AGAIN
	}
	s.log.Warn(fmt.Sprintf("DNS lookup failed: %s: result=%d", host, code))
}

// systemSOA is the zone check's default query: to the nameservers of
// resolv_conf, or of /etc/resolv.conf, read at each check.
func (s *Service) systemSOA(ctx context.Context, zone string) (uint32, error) {
	path := s.settings().ResolvConf
	if path == "" {
		path = systemResolvConf
	}
	servers, err := readNameservers(path)
	if err != nil {
		return 0, err
	}
	return soaSerial(ctx, servers, zone)
}

// dialCached is the service's dial: a TCP host name is looked up in the
// DNS cache, and its addresses dialled from the one in turn until one
// connects (internal/dnscache).
func (s *Service) dialCached(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if network != "tcp" || err != nil {
		return sockopt.ServerDialer(s.settings()).DialContext(ctx, network, address)
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return sockopt.ServerDialer(s.settings()).DialContext(ctx, network, address)
	}
	addrs, err := s.dns.Resolve(ctx, host)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	var firstErr error
	dialer := sockopt.ServerDialer(s.settings())
	for _, a := range addrs {
		c, err := dialer.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}

// addrGone marks close_needed the servers of host connected to addr, which
// its new DNS answer no longer has (PgBouncer's tag_host_addr_dirty).
func (s *Service) addrGone(host string, addr netip.Addr) {
	for _, p := range s.allPools() {
		p.mu.Lock()
		for sv := range p.servers {
			if sv.ep.host != host || sv.state == serverLogin || sv.conn == nil || sv.closeNeeded {
				continue
			}
			if ra, ok := sv.conn.RemoteAddr().(*net.TCPAddr); ok && ra.AddrPort().Addr().Unmap() == addr {
				sv.closeNeeded = true
			}
		}
		p.mu.Unlock()
	}
}

package pooler

import (
	"context"
	"net"
	"net/netip"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/dnscache"
	"github.com/pgturnstile/pgturnstile/internal/sockopt"
)

// dns_zone_check_period's passes, run by the janitor, and the dial of
// server logins through the DNS cache; the cache, resolv_conf's resolver
// and the SOA queries are internal/dnscache's.

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

// checkZones is one pass of the zone check (dnscache.Cache.CheckZones).
func (s *Service) checkZones(ctx context.Context) {
	s.dns.CheckZones(ctx, s.soa, s.log, s.debugOn)
}

// dnsFailed logs a failed lookup as PgBouncer does.
func (s *Service) dnsFailed(host string, err *net.DNSError) {
	s.log.Warn(dnscache.FailureLine(host, err))
}

// systemSOA is the zone check's default query: to the nameservers of
// resolv_conf, or of /etc/resolv.conf, read at each check.
func (s *Service) systemSOA(ctx context.Context, zone string) (uint32, error) {
	return dnscache.ZoneSerial(ctx, s.settings().ResolvConf, zone)
}

// dialCached is the service's dial: a TCP host name is looked up in the
// DNS cache, and its addresses dialled from the one in turn until one
// connects.
func (s *Service) dialCached(ctx context.Context, network, address string) (net.Conn, error) {
	return s.dns.Dial(ctx, sockopt.ServerDialer(s.settings()), network, address)
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

package dnscache

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/dns/dnsmessage"
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
// are marked close_needed (Cache.AddrGone). Go's resolver has no
// SOA lookup: the query is sent here, over UDP, to the nameservers of
// resolv_conf or else of /etc/resolv.conf.

// SystemResolvConf is where the system's nameservers are listed.
const SystemResolvConf = "/etc/resolv.conf"

// ReadNameservers returns the nameserver lines of a resolv.conf as
// host:53 addresses.
func ReadNameservers(path string) ([]string, error) {
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

// NewResolver is the resolver of the cache: Go's default one, or with
// resolv_conf one whose queries go to that file's nameservers, taken in
// turn at each attempt (the resolver retries on the next).
func NewResolver(resolvConf string) (*net.Resolver, error) {
	if resolvConf == "" {
		return net.DefaultResolver, nil
	}
	servers, err := ReadNameservers(resolvConf)
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

// ZoneSerial is the zone check's default query: zone's SOA serial from
// the nameservers of resolvConf, or of /etc/resolv.conf, read at each
// check.
func ZoneSerial(ctx context.Context, resolvConf, zone string) (uint32, error) {
	if resolvConf == "" {
		resolvConf = SystemResolvConf
	}
	servers, err := ReadNameservers(resolvConf)
	if err != nil {
		return 0, err
	}
	return SOASerial(ctx, servers, zone)
}

// SOASerial asks the nameservers for zone's SOA serial, over UDP.
func SOASerial(ctx context.Context, servers []string, zone string) (uint32, error) {
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

// CheckZones is one pass of the zone check: it asks each zone's serial in
// turn (soa, each within 5 s) and has the names of those that changed
// looked up again, with PgBouncer's log lines; debug says whether its
// DEBUG lines are wanted (-v).
func (d *Cache) CheckZones(ctx context.Context, soa func(ctx context.Context, zone string) (uint32, error), log *slog.Logger, debug func() bool) {
	for _, zone := range d.ZoneNames() {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		serial, err := soa(qctx, zone)
		cancel()
		if err != nil {
			if debug() {
				log.Debug(fmt.Sprintf("failure to get zone '%s' serial", zone))
			}
			continue
		}
		old, changed := d.NoteSerial(zone, serial)
		if !changed {
			if debug() {
				log.Debug(fmt.Sprintf("zone '%s' unchanged: serial=%d", zone, serial))
			}
			continue
		}
		log.Info(fmt.Sprintf("zone '%s' serial changed: old=%d new=%d", zone, old, serial))
		for _, name := range d.ExpireZone(zone) {
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			d.Resolve(lctx, name)
			cancel()
		}
	}
}

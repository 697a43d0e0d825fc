package dnscache

import (
	"context"
	"fmt"
	"net"
	"net/netip"
)

// Dial connects with dialer, a TCP host name looked up in the cache and
// its addresses dialled from the one in turn until one connects; an
// address, or another network, is dialled as it is.
func (d *Cache) Dial(ctx context.Context, dialer *net.Dialer, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if network != "tcp" || err != nil {
		return dialer.DialContext(ctx, network, address)
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return dialer.DialContext(ctx, network, address)
	}
	addrs, err := d.Resolve(ctx, host)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	var firstErr error
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

// FailureLine is PgBouncer's warning for a failed lookup of host, with
// getaddrinfo's code for the failure.
func FailureLine(host string, err *net.DNSError) string {
	code := -4 // EAI_FAIL
	switch {
	case err.IsNotFound:
		code = -2 // EAI_NONAME
	case err.IsTimeout || err.IsTemporary:
		code = -3 // EAI_AGAIN
	}
	return fmt.Sprintf("DNS lookup failed: %s: result=%d", host, code)
}

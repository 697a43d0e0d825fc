// Package dnstest is a dnscache.Resolver for tests: answers from a map,
// lookups counted, and a way to hold them in flight.
package dnstest

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"sync"
)

// Resolver answers from a map and counts its lookups. A name with no
// answer is not found (a *net.DNSError with IsNotFound).
type Resolver struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	lookups map[string]int
	block   chan struct{}
}

// New returns a Resolver that knows no name.
func New() *Resolver {
	return &Resolver{answers: map[string][]netip.Addr{}, lookups: map[string]int{}}
}

// Set makes host answer addrs (none: an empty answer).
func (r *Resolver) Set(host string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers[host] = nil
	for _, a := range addrs {
		r.answers[host] = append(r.answers[host], netip.MustParseAddr(a))
	}
}

// Forget makes host unknown: its lookups fail as not found.
func (r *Resolver) Forget(host string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.answers, host)
}

// Count is how many lookups of host were made.
func (r *Resolver) Count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups[host]
}

// Hold makes every lookup from now on wait until the returned function is
// called.
func (r *Resolver) Hold() (release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := make(chan struct{})
	r.block = ch
	return func() {
		r.mu.Lock()
		r.block = nil
		r.mu.Unlock()
		close(ch)
	}
}

// LookupNetIP implements dnscache.Resolver.
func (r *Resolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.lookups[host]++
	block := r.block
	a, ok := r.answers[host]
	r.mu.Unlock()
	if block != nil {
		<-block
	}
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return slices.Clone(a), nil
}

// Package listener holds the pooler's listening sockets' life outside the
// pooler: accepting on TCP without package net where the system allows
// (netpoll.Acceptor), a listener's deadline and close reaching that
// acceptor too, and the Unix socket's name, its stale-or-live check at
// start.
package listener

import (
	"net"
	"sync"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/netpoll"
)

// rawAcceptors holds the netpoll.Acceptor serving each TCP listener (on
// Linux), with the listener's deadline. An Acceptor waits on a duplicate
// of the listener's descriptor, so whatever sets the listener's deadline
// (SUSPEND) or closes it must reach the Acceptor too: SetDeadline
// and Close do both.
var rawAcceptors = struct {
	mu sync.Mutex
	m  map[net.Listener]*rawAcceptor
}{m: map[net.Listener]*rawAcceptor{}}

type rawAcceptor struct {
	a        *netpoll.Acceptor // nil until the accept loop starts
	deadline time.Time         // the last one set on the listener
	closed   bool
}

// StartAccept returns the accept function for ln's loop: the
// Acceptor's where it can have one, else ln.Accept.
func StartAccept(ln net.Listener) (accept func() (net.Conn, error), stop func()) {
	a, ok := netpoll.NewAcceptor(ln)
	if !ok {
		return ln.Accept, func() {}
	}
	rawAcceptors.mu.Lock()
	e := rawAcceptors.m[ln]
	if e == nil {
		e = &rawAcceptor{}
		rawAcceptors.m[ln] = e
	}
	if e.closed {
		// Closed between NewAcceptor and here.
		delete(rawAcceptors.m, ln)
		rawAcceptors.mu.Unlock()
		a.Close()
		return ln.Accept, func() {}
	}
	e.a = a
	if !e.deadline.IsZero() {
		a.SetDeadline(e.deadline)
	}
	rawAcceptors.mu.Unlock()
	accept = func() (net.Conn, error) {
		c, err := a.Accept()
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	stop = func() {
		rawAcceptors.mu.Lock()
		delete(rawAcceptors.m, ln)
		rawAcceptors.mu.Unlock()
		a.Close()
	}
	return accept, stop
}

// SetDeadline sets the deadline of ln's Accept, the Acceptor's
// included.
func SetDeadline(ln net.Listener, t time.Time) {
	if d, ok := ln.(interface{ SetDeadline(time.Time) error }); ok {
		d.SetDeadline(t)
	}
	if !netpoll.CanAccept {
		return
	}
	if _, tcp := ln.(*net.TCPListener); !tcp {
		return
	}
	rawAcceptors.mu.Lock()
	defer rawAcceptors.mu.Unlock()
	e := rawAcceptors.m[ln]
	if e == nil {
		e = &rawAcceptor{}
		rawAcceptors.m[ln] = e
	}
	e.deadline = t
	if e.a != nil {
		e.a.SetDeadline(t)
	}
}

// Close closes ln and the Acceptor serving it.
func Close(ln net.Listener) error {
	err := ln.Close()
	if !netpoll.CanAccept {
		return err
	}
	if _, tcp := ln.(*net.TCPListener); !tcp {
		return err
	}
	rawAcceptors.mu.Lock()
	defer rawAcceptors.mu.Unlock()
	e := rawAcceptors.m[ln]
	if e == nil {
		// Marked, in case its accept loop is starting now (which drops
		// the mark). A listener closed after its loop ended keeps the
		// mark, a few bytes, until the service ends, as its listeners
		// close only then.
		rawAcceptors.m[ln] = &rawAcceptor{closed: true}
		return err
	}
	if e.a != nil {
		e.a.Close()
		delete(rawAcceptors.m, ln)
	} else {
		e.closed = true
	}
	return err
}

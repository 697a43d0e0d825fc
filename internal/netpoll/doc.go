// Package netpoll holds the pooler's operating-system-specific socket
// code, so that the rest of the module builds everywhere Go does.
//
// On Linux (netpoll_linux.go) it provides:
//   - Read and Write: one read(2) or write(2) on a non-blocking socket,
//     made with syscall.RawSyscall so that the calling goroutine's P never
//     enters the runtime's syscall state (wire.SocketIO);
//   - PeekClosed: a non-blocking one-byte MSG_PEEK that tells whether the
//     peer closed an idle connection or sent something unasked (the
//     pooler's idle-server health check);
//   - PeerUID: the peer's user id on a Unix socket (SO_PEERCRED), for the
//     rule that lets the pooler's own OS user into the admin console
//     without a password;
//   - Acceptor and Conn (conn_linux.go): clients' TCP connections taken
//     off a listener with a raw accept4 and served without package net:
//     raw reads, writes, socket options and close, readiness from one
//     of the pooler's own epoll sets, one per core (edge-triggered,
//     nested in the runtime's netpoller, one goroutine each handing out
//     its events), net's semantics for deadlines and for Close from
//     another goroutine. No system call on a client's path then wakes
//     the runtime's sysmon thread (see Acceptor);
//   - the event loop (loop_linux.go): a Conn given a handler has its
//     events, and Post's, handled on its poller's goroutine, which
//     reads it with TryRead (never waiting), writes it in write-behind
//     mode, and watches a server's socket for it (Watch: registered
//     edge-triggered on the poller of its wait and kept there, so that
//     the next wait on that poller arms nothing); between requests a
//     Conn on the loop moves to the first poller with room, or away
//     from a saturated one (Rebalance, place_linux.go); Adopt makes
//     a Conn of a parked client's descriptor, so that it can go back on
//     a loop;
//   - PeekByte (every Unix, peek_unix.go): wait for a connection's next
//     byte and return it unconsumed (direct TLS's first-byte test);
//   - Poller and DupCloexec: a one-shot epoll set of bare descriptors,
//     which parks idle clients without a goroutine each (pooler/park.go),
//     and whose Close ends a Wait blocked in it (the service closes it
//     when it stops).
//
// Elsewhere (netpoll_other.go) the same names exist and report that the
// feature is off: RawIO, CanPeek, CanPark and CanAccept are false, so
// clients are accepted by net, wire.SocketIO hands back the net.Conn as it
// is, an idle server counts as healthy until a read says otherwise,
// clients are never parked, and a Unix socket peer's credentials are
// unknown (the password-less console rule never applies).
//
// Read, Write, PeekClosed and Conn's methods are allocation-free on
// success: they sit on the relay's hot path. Accept allocates the Conn.
package netpoll

package pooler

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"net"
	"slices"
	"strconv"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/internal/listener"
	"github.com/pgturnstile/pgturnstile/internal/stmtcache"
	"github.com/pgturnstile/pgturnstile/internal/takeover"
)

// Online restart, the old process's side: SHOW FDS's rows built from the
// service's clients, servers and listeners, and the hand-over once the new
// process has them. The conversation, what a row carries and the checks
// of what arrives are internal/takeover's; the new process adopting the
// rows as its own objects is takeover_adopt.go.
//
// The new process (pgturnstile -R: takeover.TakeOver) logs in to this
// one's console over the Unix socket and sends SUSPEND (suspend.go: every
// client that can move comes to rest, parked), SHOW FDS (FDs: each
// listener and each parked client, its descriptor passed with its row by
// fdSender) and, once it has built its service and bound what it binds
// itself, SHUTDOWN; any failure before that closes the connection
// instead, and this process resumes (admin.ServeFDs). The metrics_addr
// listener moves with the pooler's. This process then lets go of what it
// passed (HandOver) and goes on as a shutdown that waits for its
// remaining clients (those that could not move: TLS, replication,
// session-mode ones in a transaction or with a busy server, consoles);
// its pidfile goes at once. A client notices nothing but a pause: its
// next request waits in its socket until the new process reads it.
//
// Idle servers move too (plain TCP or Unix socket ones: a TLS session
// cannot leave crypto/tls), with their parameters, backend key and the
// statements they have prepared, under the names Postgres knows them by:
// the new process serves the next transaction on the same backend, with
// no login and no Parse.
//
// A session-mode client parked with its idle server (suspend.go) moves
// with it, as PgBouncer 1.18's linked pairs do: SHOW FDS lists both, each
// row's link column the other's fd column (its descriptor here), and the
// new process adopts the server as that client's. Other servers still
// linked stay with this process and their clients.

// fdSender passes descriptors to the console's client over its Unix
// socket (nil over anything else): msg goes out with fd attached to its
// first byte, after what the console wrote before it.
func (c *client) fdSender() admin.FDSender {
	return takeover.Sender(c.conn, func() error { return c.w.Flush() })
}

func (v consoleView) Suspend() error {
	_, err := v.s.Suspend()
	return err
}

// FDs lists the listeners, the parked clients and the idle servers. With
// pass, while suspended, each comes with a duplicate of its descriptor and
// the servers are held for the hand-over; otherwise the descriptors are -1
// (a parked client may resume at any moment).
func (v consoleView) FDs(pass bool) []admin.FD {
	s := v.s
	suspended := pass && s.isSuspended()
	var out []admin.FD
	port := s.settings().ListenPort
	for i, ln := range s.listenersNow() {
		out = append(out, takeover.ListenerRow(i, ln, port, suspended))
	}
	if ln := s.metricsListenerNow(); ln != nil {
		out = append(out, takeover.MetricsRow(ln, suspended))
	}
	parked := s.parker.parkedNow()
	for _, c := range s.allClients() {
		var fd int32 = -1
		for pfd, pc := range parked {
			if pc == c {
				fd = pfd
			}
		}
		if fd < 0 {
			continue // not at rest: it cannot move
		}
		r, srv, sr, ok := c.fdRow()
		if !ok {
			continue
		}
		r.FD, sr.FD = -1, -1
		if suspended {
			r.FD = takeover.Dup(int(fd))
			if srv != nil {
				sr.FD = takeover.DupSocket(srv.conn)
				if r.FD < 0 || sr.FD < 0 {
					// The pair moves together or not at all.
					for _, d := range []int{r.FD, sr.FD} {
						if d >= 0 {
							takeover.Close(d)
						}
					}
					continue
				}
				// PgBouncer's link: the descriptor of the linked row.
				r.Link, sr.Link = sr.FD, r.FD
			}
		}
		out = append(out, r)
		if srv != nil {
			out = append(out, sr)
		}
	}
	for _, p := range s.allPools() {
		out = append(out, p.handOverRows(suspended)...)
	}
	return out
}

// handOverRows describes the pool's servers that can move: idle, in plain
// TCP or over a Unix socket, nothing buffered, no cancel in flight, not
// doomed, of a pool whose target they still match. With hold they are
// taken out of the idle stack (active, held by the hand-over: nothing else
// uses them meanwhile), recorded on the service, and their rows carry a
// duplicate of their descriptor. Under p.mu, which guards an idle server.
func (p *serverPool) handOverRows(hold bool) []admin.FD {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []admin.FD
	target := p.target.Load()
	for _, srv := range slices.Clone(p.idle) {
		if srv.repl != replNone || srv.closeNeeded || srv.cancels.Load() > 0 || srv.r.Buffered() > 0 ||
			srv.target != target || !target.hasEndpoint(srv.ep.address) {
			continue
		}
		if _, isTLS := srv.conn.(*tls.Conn); isTLS {
			continue
		}
		r := srv.fdRow()
		if hold {
			if r.FD = takeover.DupSocket(srv.conn); r.FD < 0 {
				continue
			}
			p.setServerStateLocked(srv, serverActive)
			p.svc.susp.holdServer(srv)
		}
		out = append(out, r)
	}
	return out
}

// hasEndpoint says whether address is one of the target's hosts.
func (t *poolTarget) hasEndpoint(address string) bool {
	for _, ep := range t.endpoints {
		if ep.address == address {
			return true
		}
	}
	return false
}

// fdRow describes a server held for the hand-over.
func (srv *server) fdRow() admin.FD {
	p := srv.pool
	r := admin.FD{FD: -1, ID: srv.id, Task: "server", User: p.key.user, Database: p.key.db,
		ClientEncoding: srv.params["client_encoding"], StdStrings: srv.params["standard_conforming_strings"],
		DateStyle: srv.params["DateStyle"], TimeZone: srv.params["TimeZone"]}
	if len(srv.cancelKey) >= 4 {
		r.Cancel = int64(binary.BigEndian.Uint32(srv.cancelKey[:4]))
	}
	if ra, ok := srv.conn.RemoteAddr().(*net.TCPAddr); ok {
		r.Addr, r.Port = ra.IP.String(), ra.Port
	} else {
		r.Addr = "unix"
	}
	st := takeover.State{Key: hex.EncodeToString(srv.cancelKey), PID: srv.pid, Params: srv.params,
		Connected: srv.created, Endpoint: srv.ep.address,
		Unreported: srv.unreported, UnreportedDirty: srv.unreportedDirty}
	for _, d := range srv.stmts.Defs() {
		st.Stmts = append(st.Stmts, takeover.Stmt{Name: d.Name, Query: d.Query, Types: d.Types})
	}
	r.State = takeover.Marshal(st)
	return r
}

// fdRow describes a parked client for SHOW FDS, and the server it parked
// with (srv, its row sr), if any; false if it cannot move.
func (c *client) fdRow() (r admin.FD, srv *server, sr admin.FD, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.state != clientParked || c.pool == nil || c.tls || c.repl != replNone || c.dbName == adminDB || !c.shard.movable() {
		return admin.FD{}, nil, admin.FD{}, false
	}
	if srv = c.mu.parkedSrv; srv != nil {
		// Under c.mu, which a linked server's holder owns: parked, the
		// client touches it no more.
		sr = srv.fdRow()
	}
	r = admin.FD{
		ID: c.id, Task: "client", User: c.user, Database: c.dbName,
		Cancel:         int64(binary.BigEndian.Uint64(c.key[:])),
		ClientEncoding: c.params["client_encoding"], StdStrings: c.params["standard_conforming_strings"],
		DateStyle: c.params["DateStyle"], TimeZone: c.params["TimeZone"],
	}
	if c.local {
		r.Addr, r.Port = "unix", c.svc.settings().ListenPort
	} else {
		r.Addr, r.Port = c.raddr.Addr().String(), int(c.raddr.Port())
	}
	cred := c.pool.credentials()
	if cred.Secret != nil {
		r.Password = cred.Secret.Plain
		if cred.Secret.Kind == auth.SecretSCRAM {
			r.ScramServerKey = cred.Secret.ServerKey
		}
	}
	r.ScramClientKey = cred.ClientKey
	st := takeover.State{
		Key: hex.EncodeToString(c.key[:]), Params: c.params,
		Local: c.local, UnixPeer: c.unixPeer, Connected: c.connectedAt(), Cred: &cred,
	}
	if c.raddr.IsValid() {
		st.Raddr, st.Laddr = c.raddr.String(), c.laddr.String()
	}
	for name, cs := range c.mu.stmts {
		if c.mu.unconfirmed[name] {
			continue // the client never got its ParseComplete
		}
		st.Stmts = append(st.Stmts, movedClientStmt(name, cs))
	}
	r.State = takeover.Marshal(st)
	return r, srv, sr, true
}

// movedClientStmt is the moved form of the client's name for cs.
func movedClientStmt(name string, cs *stmtcache.ClientStmt) takeover.Stmt {
	return takeover.Stmt{Name: name, Query: cs.Def.Query, Types: cs.Def.Types, Stale: !cs.Current()}
}

// HandOver lets go of the clients and listeners a SHOW FDS passed to the
// process that took them over, then ends this one as SHUTDOWN
// WAIT_FOR_CLIENTS does, for the clients that stay.
func (v consoleView) HandOver(ids []uint64) {
	s := v.s
	want := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	// From here on the listeners' end is the shutdown's, not an error.
	s.shuttingDown.Store(true)
	s.mu.Lock()
	lns := s.listeners
	s.listeners = nil
	s.mu.Unlock()
	for i, ln := range lns {
		if ul, ok := ln.(*net.UnixListener); ok && want[takeover.ListenerID|uint64(i)] {
			// The socket's name is the new process's: do not unlink it.
			ul.SetUnlinkOnClose(false)
		}
		listener.Close(ln)
	}
	nln := len(lns)
	if want[takeover.MetricsID] {
		s.closeMetricsListener()
		nln++
	}
	moved, movedServers := 0, 0
	for _, c := range s.allClients() {
		if !want[c.id] {
			continue
		}
		c.mu.Lock()
		srv := c.mu.parkedSrv
		c.mu.Unlock()
		if srv != nil && !want[srv.id] {
			continue // a client goes with its server or not at all
		}
		fd, ok := s.parker.release(c)
		if !ok {
			continue
		}
		if srv != nil {
			c.mu.Lock()
			c.mu.parkedSrv = nil
			c.mu.Unlock()
			srv.pool.handOverServer(srv)
			movedServers++
		}
		// Closing this process's descriptor leaves the connection open:
		// the new process holds it.
		takeover.Close(fd)
		s.clientClosed(c)
		moved++
	}
	servers := s.susp.takeHeldServers()
	for _, srv := range servers {
		if want[srv.id] {
			srv.pool.handOverServer(srv)
			movedServers++
		} else {
			srv.pool.unholdServer(srv)
		}
	}
	s.log.Info("takeover: handed over " + strconv.Itoa(moved) + " clients, " + strconv.Itoa(movedServers) + " servers and " + strconv.Itoa(nln) + " listening sockets")
	// Whatever stays parked here goes on here.
	s.ResumeSuspended()
	if s.afterHandOver != nil {
		s.afterHandOver()
	}
	s.Shutdown(context.Background(), admin.ShutdownWaitForClients)
}

// WithHandOverHook has fn called once this process has handed its clients
// and listeners to the one that took it over: the command removes its
// pidfile then, for the new process to write its own.
func WithHandOverHook(fn func()) Option {
	return func(s *Service) { s.afterHandOver = fn }
}

// handOverServer lets go of a server the new process took: out of the
// pool, its limits' slots given back, its socket closed here without a
// Terminate (the connection lives on in the new process).
func (p *serverPool) handOverServer(srv *server) {
	p.mu.Lock()
	p.setServerStateLocked(srv, serverClosed)
	delete(p.servers, srv)
	p.mu.Unlock()
	srv.conn.Close()
	srv.stmts.Clear(p.svc.stmts)
	p.dbLimit.Give()
	p.userLimit.Give()
	p.svc.changes.Notify()
}

// unholdServer gives a held server back to its pool (the takeover did not
// come, or did not take it).
func (p *serverPool) unholdServer(srv *server) {
	p.mu.Lock()
	p.handOffLocked(srv)
	p.mu.Unlock()
}

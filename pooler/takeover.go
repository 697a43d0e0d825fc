package pooler

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
)

// Online restart: the old process's side (SHOW FDS, the hand-over) and
// the new process's (adopting what it was handed).
//
// The new process (pgturnstile -R, takeover_unix.go) logs in to the old
// one's console over the Unix socket, sends SUSPEND (suspend.go: every
// client that can move comes to rest, parked), SHOW FDS (each listener and
// each parked client, its descriptor passed with its row) and SHUTDOWN.
// The old process then lets go of what it passed (HandOver) and goes on
// as a shutdown that waits for its remaining clients (those that could not
// move: TLS, replication, session-mode ones holding a server, consoles);
// its pidfile goes at once. The new process serves the listeners and takes
// every client up as a parked client of its own, with its session whole:
// database, user, parameters, cancel key, prepared statements and the
// credentials its pool's servers log in with (SCRAM pass-through keys
// included). A client notices nothing but a pause: its next request
// waits in its socket until the new process reads it.
//
// Servers are not handed over: the old process's servers are idle once
// its clients are parked, and it closes them when it ends; the new
// process logs in its own as its pools need them (min_pool_size warms
// them first), and prepares each client's statements on them as it does
// on any server, lazily.

// movedState is SHOW FDS's pgturnstile_state: the part of a client's
// session (or a listener's identity) PgBouncer's columns do not carry.
type movedState struct {
	// Listeners.
	Network string `json:"network,omitempty"` // "tcp" or "unix"
	Address string `json:"address,omitempty"`

	// Clients.
	Key       string                  `json:"key,omitempty"` // the cancel key, hex
	Params    map[string]string       `json:"params,omitempty"`
	Stmts     []movedStmt             `json:"stmts,omitempty"`
	Local     bool                    `json:"local,omitempty"`
	UnixPeer  string                  `json:"unix_peer,omitempty"`
	Raddr     string                  `json:"raddr,omitempty"`
	Laddr     string                  `json:"laddr,omitempty"`
	Connected time.Time               `json:"connected,omitzero"`
	Cred      *auth.ServerCredentials `json:"cred,omitempty"`
}

// movedStmt is one of a client's named prepared statements.
type movedStmt struct {
	Name  string `json:"name"`
	Query string `json:"query"`
	Types []byte `json:"types,omitempty"` // the Parse's parameter-type section
}

// listenerID marks a SHOW FDS row's ID as a listener's index, apart from
// client ids (which count from 1 and never reach it).
const listenerID = 1 << 63

func (v consoleView) Suspend() error {
	_, err := v.s.Suspend()
	return err
}

// FDs lists the listeners and the parked clients with a duplicate of each
// descriptor; the descriptors only while suspended (-1 otherwise: a
// parked client may resume at any moment).
func (v consoleView) FDs() []admin.FD {
	s := v.s
	suspended := s.isSuspended()
	var out []admin.FD
	port := s.settings().ListenPort
	for i, ln := range s.listenersNow() {
		r := admin.FD{FD: -1, ID: listenerID | uint64(i), Task: "pooler"}
		st := movedState{Network: ln.Addr().Network(), Address: ln.Addr().String()}
		switch a := ln.Addr().(type) {
		case *net.UnixAddr:
			r.Addr, r.Port = "unix", port
			st.Network = "unix"
		case *net.TCPAddr:
			r.Addr, r.Port = a.IP.String(), a.Port
			st.Network = "tcp"
		}
		if suspended {
			r.FD = dupListener(ln)
		}
		r.State = marshalState(st)
		out = append(out, r)
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
		r, ok := c.fdRow()
		if !ok {
			continue
		}
		r.FD = -1
		if suspended {
			r.FD = dupFD(int(fd))
		}
		out = append(out, r)
	}
	return out
}

// fdRow describes a parked client for SHOW FDS; false if it cannot move.
func (c *client) fdRow() (admin.FD, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != clientParked || c.pool == nil || c.tls || c.repl != replNone || c.dbName == adminDB {
		return admin.FD{}, false
	}
	r := admin.FD{
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
	st := movedState{
		Key: hex.EncodeToString(c.key[:]), Params: c.params,
		Local: c.local, UnixPeer: c.unixPeer, Connected: c.connected, Cred: &cred,
	}
	if c.raddr.IsValid() {
		st.Raddr, st.Laddr = c.raddr.String(), c.laddr.String()
	}
	for name, d := range c.stmts {
		if c.unconfirmed[name] {
			continue // the client never got its ParseComplete
		}
		st.Stmts = append(st.Stmts, movedStmt{Name: name, Query: d.query, Types: d.types})
	}
	r.State = marshalState(st)
	return r, true
}

func marshalState(st movedState) string {
	b, err := json.Marshal(st)
	if err != nil {
		panic("BUG: takeover: " + err.Error())
	}
	return string(b)
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
		if ul, ok := ln.(*net.UnixListener); ok && want[listenerID|uint64(i)] {
			// The socket's name is the new process's: do not unlink it.
			ul.SetUnlinkOnClose(false)
		}
		ln.Close()
	}
	moved := 0
	for _, c := range s.allClients() {
		if !want[c.id] {
			continue
		}
		fd, ok := s.parker.release(c)
		if !ok {
			continue
		}
		// Closing this process's descriptor leaves the connection open:
		// the new process holds it.
		closeFD(fd)
		s.clientClosed(c)
		moved++
	}
	s.log.Info("takeover: handed over " + strconv.Itoa(moved) + " clients and " + strconv.Itoa(len(lns)) + " listening sockets")
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

// Handover is what an online restart took over from the old process:
// its listeners and its clients at rest, each with its descriptor.
type Handover struct {
	Listeners []net.Listener
	clients   []movedClient
}

// Clients is how many clients were taken over.
func (h *Handover) Clients() int { return len(h.clients) }

// movedClient is one client row of SHOW FDS, as the new process read it.
type movedClient struct {
	fd             int
	user, database string
	state          movedState
}

// WithHandover has the service serve what an online restart took over:
// its listeners (as WithListeners) and its clients, adopted when Serve
// starts.
func WithHandover(h *Handover) Option {
	return func(s *Service) {
		s.inherited = h.Listeners
		s.moved = h.clients
	}
}

// adoptMoved takes up the clients an online restart handed over, each as
// a parked client of this process.
func (s *Service) adoptMoved() {
	moved := s.moved
	s.moved = nil
	n := 0
	for _, m := range moved {
		if err := s.adopt(m); err != nil {
			s.log.Warn("takeover: client " + m.user + "@" + m.database + " not taken over: " + err.Error())
			closeFD(m.fd)
			continue
		}
		n++
	}
	if len(moved) > 0 {
		s.log.Info("takeover: took over " + strconv.Itoa(n) + " clients")
	}
}

// adopt makes one handed-over client a parked client of this process.
func (s *Service) adopt(m movedClient) error {
	cfg := s.config()
	db, ok := cfg.LookupDatabase(m.database)
	if !ok {
		return newError(CodeNoSuchDatabase, m.database)
	}
	pool, err := s.poolFor(db, m.user)
	if err != nil {
		return err
	}
	defer s.unpin(pool)
	if err := s.parker.start(); err != nil {
		return err
	}
	st := m.state
	c := &client{
		svc: s, id: s.socketIDs.Add(1), user: m.user, dbName: m.database,
		connected: st.Connected, local: st.Local, unixPeer: st.UnixPeer,
		params: st.Params, conn: parkedConn{},
	}
	if c.params == nil {
		c.params = map[string]string{}
	}
	if k, err := hex.DecodeString(st.Key); err == nil && len(k) == len(c.key) {
		copy(c.key[:], k)
	}
	c.raddr, _ = netip.ParseAddrPort(st.Raddr)
	c.laddr, _ = netip.ParseAddrPort(st.Laddr)
	if db.User == "" && st.Cred != nil && st.Cred.Secret != nil {
		pool.setCredentials(st.Cred.Secret, st.Cred.ClientKey)
	}
	// Counted in the client caps as at login, but never refused: it is
	// logged in already.
	_ = c.checkClientCaps(cfg, db, true)
	s.clientCount.Add(1)
	s.wg.Add(1)
	stl := &cfg.Settings
	c.pool = pool
	c.mode = pool.effective().PoolMode
	c.tracking = c.mode != config.PoolModeSession && stl.MaxPreparedStatements > 0
	c.enterPool()
	c.mu.Lock()
	for _, ms := range st.Stmts {
		d := s.stmts.acquire(ms.Query, ms.Types, 0)
		if c.stmts == nil {
			c.stmts = map[string]*stmtDef{}
		}
		c.stmts[ms.Name] = d
	}
	c.mu.Unlock()
	s.registerCancel(c)
	c.mu.Lock()
	c.setStateLocked(clientIdle)
	c.setStateLocked(clientParked)
	c.mu.Unlock()
	pk := &s.parker
	pk.mu.Lock()
	pk.parked[int32(m.fd)] = c
	c.parkFD = int32(m.fd)
	err = pk.poller.Add(m.fd)
	if err != nil {
		delete(pk.parked, int32(m.fd))
	}
	pk.mu.Unlock()
	if err != nil {
		go c.resume(m.fd)
	}
	return nil
}

package pooler

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/listener"
	"github.com/pgturnstile/pgturnstile/wire"
)

// Online restart: the old process's side (SHOW FDS, the hand-over) and
// the new process's (adopting what it was handed).
//
// The new process (pgturnstile -R, takeover_unix.go) logs in to the old
// one's console over the Unix socket, sends SUSPEND (suspend.go: every
// client that can move comes to rest, parked), SHOW FDS (each listener and
// each parked client, its descriptor passed with its row) and, once it
// has built its service and bound what it binds itself, SHUTDOWN; any
// failure before that closes the connection instead, and the old process
// resumes (ServeFDs). It trusts only a process of its own user or root on
// the socket (SO_PEERCRED), and refuses the takeover (ErrRefused) on any
// row it would not send itself: its descriptor (internal/fdcheck), its state
// (checkRow), its user and database (checkHandover). The metrics_addr
// listener moves with the pooler's.
// The old process then lets go of what it passed (HandOver) and goes on
// as a shutdown that waits for its remaining clients (those that could not
// move: TLS, replication, session-mode ones in a transaction or with a
// busy server, consoles);
// its pidfile goes at once. The new process serves the listeners and takes
// every client up as a parked client of its own, with its session whole:
// database, user, parameters, cancel key, prepared statements and the
// credentials its pool's servers log in with (SCRAM pass-through keys
// included). A client notices nothing but a pause: its next request
// waits in its socket until the new process reads it.
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
// new process adopts the server as that client's (active, not in the idle
// stack): the session goes on on the same backend. The links are checked
// as the rows are (checkLinks: a client and a server naming each other,
// one client per server; checkLinked: a session-mode client here, of the
// server's user). Other servers still linked stay with the old process
// and their clients.

// movedState is SHOW FDS's pgturnstile_state: the part of a client's
// session (or a listener's identity) PgBouncer's columns do not carry.
type movedState struct {
	// Listeners.
	Network string `json:"network,omitempty"` // "tcp" or "unix"
	Address string `json:"address,omitempty"`
	Metrics bool   `json:"metrics,omitempty"` // metrics_addr's, not a pooler listener

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

	// Servers (and Params, Stmts, Connected above).
	PID      uint32 `json:"pid,omitempty"`
	Endpoint string `json:"endpoint,omitempty"` // the address it dialled
	// Unreported and UnreportedDirty are the server's record of the
	// tracked parameters Postgres does not report (server.unreported):
	// without it the new process would not know to RESET a search_path
	// an earlier client had, and would hand it to the next one.
	Unreported      map[string]string `json:"unreported,omitempty"`
	UnreportedDirty bool              `json:"unreported_dirty,omitempty"`
}

// movedStmt is one of a client's named prepared statements.
type movedStmt struct {
	Name  string `json:"name"` // the client's name; a server's: the name on Postgres
	Query string `json:"query"`
	Types []byte `json:"types,omitempty"` // the Parse's parameter-type section
	// Stale marks a client's name whose description is older than its
	// statement's shape (clientStmt): it stays refused with 0A000 in the
	// new process (adoptClientStmt). An older process never sets it.
	Stale bool `json:"stale,omitempty"`
}

// movedClientStmt is the moved form of the client's name for cs.
func movedClientStmt(name string, cs *clientStmt) movedStmt {
	return movedStmt{Name: name, Query: cs.def.query, Types: cs.def.types, Stale: !cs.current()}
}

// adoptClientStmt is a moved client name in this process, with one
// reference to its definition. A stale one is held at an epoch older than
// its definition's, which is bumped past it if need be: the other names
// and server copies of the text adopted at that epoch go stale too, which
// costs them a 0A000 or a prepare again, never a wrong shape.
func adoptClientStmt(reg *stmtRegistry, ms movedStmt) *clientStmt {
	d := reg.acquire(ms.Query, ms.Types, 0)
	cs := &clientStmt{def: d, epoch: d.epoch.Load()}
	if ms.Stale {
		d.bumpEpoch(cs.epoch)
	}
	return cs
}

// listenerID marks a SHOW FDS row's ID as a listener's index, apart from
// client ids (which count from 1 and never reach it); metricsID is the
// metrics_addr listener's.
const (
	listenerID = 1 << 63
	metricsID  = listenerID | 1<<62
)

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
	if ln := s.metricsListenerNow(); ln != nil {
		// The new process serves the metrics port from the moment it
		// takes over: bound here, it could not bind it itself.
		r := admin.FD{FD: -1, ID: metricsID, Task: "pooler"}
		if a, ok := ln.Addr().(*net.TCPAddr); ok {
			r.Addr, r.Port = a.IP.String(), a.Port
		}
		if suspended {
			r.FD = dupListener(ln)
		}
		r.State = marshalState(movedState{Network: "tcp", Address: ln.Addr().String(), Metrics: true})
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
		r, srv, sr, ok := c.fdRow()
		if !ok {
			continue
		}
		r.FD, sr.FD = -1, -1
		if suspended {
			r.FD = dupFD(int(fd))
			if srv != nil {
				sr.FD = dupServerFD(srv)
				if r.FD < 0 || sr.FD < 0 {
					// The pair moves together or not at all.
					for _, d := range []int{r.FD, sr.FD} {
						if d >= 0 {
							closeFD(d)
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
			if r.FD = dupServerFD(srv); r.FD < 0 {
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
	st := movedState{Key: hex.EncodeToString(srv.cancelKey), PID: srv.pid, Params: srv.params,
		Connected: srv.created, Endpoint: srv.ep.address,
		Unreported: srv.unreported, UnreportedDirty: srv.unreportedDirty}
	for _, d := range srv.stmts.defs() {
		st.Stmts = append(st.Stmts, movedStmt{Name: d.name, Query: d.query, Types: d.types})
	}
	r.State = marshalState(st)
	return r
}

// fdRow describes a parked client for SHOW FDS, and the server it parked
// with (srv, its row sr), if any; false if it cannot move.
func (c *client) fdRow() (r admin.FD, srv *server, sr admin.FD, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != clientParked || c.pool == nil || c.tls || c.repl != replNone || c.dbName == adminDB {
		return admin.FD{}, nil, admin.FD{}, false
	}
	if srv = c.parkedSrv; srv != nil {
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
	st := movedState{
		Key: hex.EncodeToString(c.key[:]), Params: c.params,
		Local: c.local, UnixPeer: c.unixPeer, Connected: c.connected, Cred: &cred,
	}
	if c.raddr.IsValid() {
		st.Raddr, st.Laddr = c.raddr.String(), c.laddr.String()
	}
	for name, cs := range c.stmts {
		if c.unconfirmed[name] {
			continue // the client never got its ParseComplete
		}
		st.Stmts = append(st.Stmts, movedClientStmt(name, cs))
	}
	r.State = marshalState(st)
	return r, srv, sr, true
}

func marshalState(st movedState) string {
	b, err := json.Marshal(st)
	if err != nil {
		panic("BUG: takeover: " + err.Error())
	}
	return string(b)
}

// ErrRefused wraps every reason a takeover is refused: the process on the
// socket is not one to trust, or what it handed over is not what a
// pgturnstile hands over, or not what this configuration serves. Nothing
// it sent is used, and the old process goes on.
var ErrRefused = errors.New("takeover refused")

// checkRow says whether a SHOW FDS row is one a pgturnstile sends: a known
// task, with the state that task needs. Its descriptor is internal/fdcheck's.
func checkRow(task string, row map[string]string, st movedState) error {
	switch task {
	case "pooler":
		if st.Network != "tcp" && st.Network != "unix" || st.Metrics && st.Network != "tcp" {
			return fmt.Errorf("a listener of network %q", st.Network)
		}
		return nil
	case "client", "server":
	default:
		return fmt.Errorf("unknown task %q", task)
	}
	user, db := row["user"], row["database"]
	switch {
	case user == "" || db == "":
		return errors.New("no user or no database")
	case db == adminDB:
		return errors.New("a console session, which never moves")
	}
	for name, v := range st.Params {
		if name == "" || strings.IndexByte(name, 0) >= 0 || strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("parameter %q is not one a client can set", name)
		}
	}
	for _, ms := range st.Stmts {
		if strings.IndexByte(ms.Name, 0) >= 0 || strings.IndexByte(ms.Query, 0) >= 0 {
			return fmt.Errorf("prepared statement %q is not one a client can prepare", ms.Name)
		}
	}
	key, err := hex.DecodeString(st.Key)
	if task == "client" {
		if err != nil || len(key) != 8 {
			return errors.New("a cancel key that is not 8 bytes")
		}
		if !st.Local {
			if _, err := netip.ParseAddrPort(st.Raddr); err != nil {
				return fmt.Errorf("client address: %v", err)
			}
			if _, err := netip.ParseAddrPort(st.Laddr); err != nil {
				return fmt.Errorf("local address: %v", err)
			}
		}
		return nil
	}
	switch {
	case err != nil || len(key) < 4:
		return errors.New("a backend key that is not at least 4 bytes")
	case st.PID == 0:
		return errors.New("no backend pid")
	case st.Endpoint == "":
		return errors.New("no endpoint")
	}
	return nil
}

// checkHandover refuses a takeover (New fails, the command aborts it and
// the old process goes on) when a client or server handed over is of a
// database this configuration does not serve, or of a user who could not
// log in here: not in auth_file, with no auth_query and an auth_type that
// needs one of the two. The old process's configuration and this one can
// differ, and a row is not to be trusted for more than it can show.
func (s *Service) checkHandover() error {
	cfg := s.config()
	for _, m := range s.movedServers {
		if err := s.checkMoved(cfg, m, true); err != nil {
			return fmt.Errorf("%w: server %s@%s: %v", ErrRefused, m.user, m.database, err)
		}
	}
	servers := map[int]movedClient{}
	for _, m := range s.movedServers {
		servers[m.oldFD] = m
	}
	for _, m := range s.moved {
		err := s.checkMoved(cfg, m, false)
		if err == nil && m.link != 0 {
			err = checkLinked(cfg, m, servers[m.link])
		}
		if err != nil {
			return fmt.Errorf("%w: client %s@%s: %v", ErrRefused, m.user, m.database, err)
		}
	}
	return nil
}

// checkLinked refuses a client handed over linked to a server (srv) unless
// this configuration serves it in session mode, and its pool's servers log
// in as srv's user: the session goes on on that server, as its client's
// own.
func checkLinked(cfg *config.Config, m, srv movedClient) error {
	db, _ := cfg.LookupDatabase(m.database) // checkMoved found it
	if mode := cfg.Resolve(db, m.user).PoolMode; mode != config.PoolModeSession {
		return fmt.Errorf("linked to a server, in pool_mode %s (only a session-mode client keeps one)", mode)
	}
	login := m.user
	if db.User != "" {
		login = db.User
	}
	if srv.user != login {
		return fmt.Errorf("linked to a server of user %q, not %q", srv.user, login)
	}
	return nil
}

func (s *Service) checkMoved(cfg *config.Config, m movedClient, server bool) error {
	db, ok := cfg.LookupDatabase(m.database)
	if !ok {
		return fmt.Errorf("database %q is not served here", m.database)
	}
	if server && db.User != "" {
		// A forced user's pool: its servers log in as db.User.
		if m.user != db.User {
			return fmt.Errorf("the database's servers log in as %q", db.User)
		}
		return nil
	}
	if _, ok := s.secret(m.user); ok {
		return nil
	}
	st := &cfg.Settings
	switch st.AuthType {
	case "any", "cert", "hba", "ldap", "pam":
		// Logins that do not need auth_file: the user may be anyone
		// these admit.
		return nil
	}
	if (db.AuthUser != "" || st.AuthUser != "") && st.AuthQuery != "" {
		return nil // auth_query finds its users
	}
	return fmt.Errorf("user %q is not in auth_file", m.user)
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
		listener.Close(ln)
	}
	nln := len(lns)
	if want[metricsID] {
		s.closeMetricsListener()
		nln++
	}
	moved, movedServers := 0, 0
	for _, c := range s.allClients() {
		if !want[c.id] {
			continue
		}
		c.mu.Lock()
		srv := c.parkedSrv
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
			c.parkedSrv = nil
			c.mu.Unlock()
			srv.pool.handOverServer(srv)
			movedServers++
		}
		// Closing this process's descriptor leaves the connection open:
		// the new process holds it.
		closeFD(fd)
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
	srv.stmts.clear(p.svc.stmts)
	p.dbLimit.give()
	p.userLimit.give()
	p.svc.changes.notify()
}

// unholdServer gives a held server back to its pool (the takeover did not
// come, or did not take it).
func (p *serverPool) unholdServer(srv *server) {
	p.mu.Lock()
	p.handOffLocked(srv)
	p.mu.Unlock()
}

// Handover is what an online restart took over from the old process:
// its listeners, its clients at rest and its idle servers, each with its
// descriptor.
type Handover struct {
	Listeners []net.Listener
	// Metrics is the old process's metrics_addr listener; nil if none.
	Metrics net.Listener
	clients []movedClient
	servers []movedClient
	// conn is the console session with the old process, until Commit
	// or Abort.
	conn *takeoverConn
}

// Servers is how many servers were taken over.
func (h *Handover) Servers() int { return len(h.servers) }

// Clients is how many clients were taken over.
func (h *Handover) Clients() int { return len(h.clients) }

// movedClient is one client or server row of SHOW FDS, as the new
// process read it.
type movedClient struct {
	fd             int
	user, database string
	state          movedState
	// oldFD and link are the row's fd and link columns: its descriptor
	// in the old process, and that of the row it is linked to (0: none),
	// a session-mode client and its server (checkLinks).
	oldFD, link int
}

// checkLinks refuses the rows' links unless each is what SUSPEND makes: a
// client and a server of the same database naming each other, each server
// linked to one client at most. The pool mode and the users are
// checkHandover's, against the configuration.
func (h *Handover) checkLinks() error {
	rows := map[int]*movedClient{}
	servers := map[int]*movedClient{}
	for i := range h.servers {
		m := &h.servers[i]
		if _, dup := rows[m.oldFD]; dup {
			return fmt.Errorf("two rows with descriptor %d", m.oldFD)
		}
		rows[m.oldFD], servers[m.oldFD] = m, m
	}
	for i := range h.clients {
		m := &h.clients[i]
		if _, dup := rows[m.oldFD]; dup {
			return fmt.Errorf("two rows with descriptor %d", m.oldFD)
		}
		rows[m.oldFD] = m
	}
	linkedBy := map[int]int{} // a server's descriptor: its client's
	for _, m := range h.clients {
		if m.link == 0 {
			continue
		}
		srv := servers[m.link]
		switch {
		case srv == nil:
			return fmt.Errorf("client %s@%s is linked to %d, which is no server row", m.user, m.database, m.link)
		case linkedBy[m.link] != 0:
			return fmt.Errorf("server %d is linked to two clients", m.link)
		case srv.link != m.oldFD:
			return fmt.Errorf("client %d is linked to server %d, which is linked to %d", m.oldFD, m.link, srv.link)
		case srv.database != m.database:
			return fmt.Errorf("client of %q linked to a server of %q", m.database, srv.database)
		}
		linkedBy[m.link] = m.oldFD
	}
	for _, m := range h.servers {
		if m.link != 0 && linkedBy[m.oldFD] != m.link {
			return fmt.Errorf("server %d is linked to %d, which is no client row linked to it", m.oldFD, m.link)
		}
	}
	return nil
}

// WithHandover has the service serve what an online restart took over:
// its listeners (as WithListeners) and its clients, adopted when Serve
// starts.
func WithHandover(h *Handover) Option {
	return func(s *Service) {
		s.inherited = h.Listeners
		s.moved = h.clients
		s.movedServers = h.servers
	}
}

// adoptMoved takes up the clients an online restart handed over, each as
// a parked client of this process.
func (s *Service) adoptMoved() {
	// Servers first: their statements keep their names on Postgres, and
	// the clients' statements then map to those definitions.
	servers := s.movedServers
	s.movedServers = nil
	ns := 0
	// linked are the servers taken over linked to a client, by their
	// descriptor in the old process: each goes to its client.
	linked := map[int]*server{}
	for _, m := range servers {
		srv, err := s.adoptServer(m)
		if err != nil {
			s.log.Warn("takeover: server of " + m.user + "@" + m.database + " not taken over: " + err.Error())
			closeFD(m.fd)
			continue
		}
		if m.link != 0 {
			linked[m.oldFD] = srv
		}
		ns++
	}
	if len(servers) > 0 {
		s.log.Info("takeover: took over " + strconv.Itoa(ns) + " servers")
	}
	moved := s.moved
	s.moved = nil
	n := 0
	for _, m := range moved {
		var srv *server
		if m.link != 0 {
			if srv = linked[m.link]; srv == nil {
				// Its session lives on that server alone: a new one
				// would lose it without a word.
				s.log.Warn("takeover: client " + m.user + "@" + m.database + " not taken over: its server was not")
				closeFD(m.fd)
				continue
			}
			delete(linked, m.link)
		}
		if err := s.adopt(m, srv); err != nil {
			s.log.Warn("takeover: client " + m.user + "@" + m.database + " not taken over: " + err.Error())
			closeFD(m.fd)
			if srv != nil {
				srv.pool.discard(srv, "client close request")
			}
			continue
		}
		n++
	}
	for _, srv := range linked {
		// checkLinks lets no linked server without its client through.
		srv.pool.discard(srv, "client close request")
	}
	if len(moved) > 0 {
		s.log.Info("takeover: took over " + strconv.Itoa(n) + " clients")
	}
}

// adopt makes one handed-over client a parked client of this process;
// srv, when not nil, is the server it came linked to (adoptServer), which
// it takes up again when it resumes (client.parkedSrv).
func (s *Service) adopt(m movedClient, srv *server) error {
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
	if srv != nil && (pool.effective().PoolMode != config.PoolModeSession || srv.pool != pool) {
		return errors.New("linked to a server, but not a session-mode client of its pool here")
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
		if c.stmts == nil {
			c.stmts = map[string]*clientStmt{}
		}
		c.stmts[ms.Name] = adoptClientStmt(s.stmts, ms)
	}
	c.mu.Unlock()
	s.registerCancel(c)
	c.mu.Lock()
	c.setStateLocked(clientIdle)
	c.setStateLocked(clientParked)
	if srv != nil {
		c.parkedSrv = srv
		srv.linkedTo.Store(c.id)
	}
	c.mu.Unlock()
	if err := s.parker.lot.Park(m.fd, c); err != nil {
		go c.resume(m.fd)
	}
	return nil
}

// adoptServer makes one handed-over server an idle server of its pool
// here, with its parameters, cancel key and prepared statements; one that
// came linked to a client (m.link) is held for it instead (active), its
// session left as it is.
func (s *Service) adoptServer(m movedClient) (*server, error) {
	cfg := s.config()
	db, ok := cfg.LookupDatabase(m.database)
	if !ok {
		return nil, newError(CodeNoSuchDatabase, m.database)
	}
	p, err := s.poolFor(db, m.user)
	if err != nil {
		return nil, err
	}
	defer s.unpin(p)
	target := p.target.Load()
	var ep endpoint
	found := false
	for _, e := range target.endpoints {
		if e.address == m.state.Endpoint {
			ep, found = e, true
		}
	}
	if !found {
		return nil, errors.New("its host is no longer the database's")
	}
	key, err := hex.DecodeString(m.state.Key)
	if err != nil {
		return nil, err
	}
	conn, err := fileConn(m.fd)
	if err != nil {
		return nil, err
	}
	if !p.dbLimit.tryTake() {
		conn.Close()
		return nil, errors.New("max_db_connections reached")
	}
	if !p.userLimit.tryTake() {
		p.dbLimit.give()
		conn.Close()
		return nil, errors.New("max_user_connections reached")
	}
	p.mu.Lock()
	srv := p.newLoginLocked()
	p.mu.Unlock()
	srv.ep = ep
	srv.serverTLS = s.gen.Load().sec.serverTLS
	sio := wire.SocketIO(conn)
	srv.conn, srv.r, srv.w = conn, wire.NewReader(sio, wire.DefaultBufferSize), wire.NewWriter(sio, wire.DefaultBufferSize)
	srv.pid, srv.cancelKey, srv.params = m.state.PID, key, m.state.Params
	if srv.params == nil {
		srv.params = map[string]string{}
	}
	srv.unreported, srv.unreportedDirty = m.state.Unreported, m.state.UnreportedDirty
	srv.noteReadOnly()
	srv.noteAppName(srv.params["application_name"])
	srv.created, srv.lastUsed = m.state.Connected, s.clock.Now()
	for _, ms := range m.state.Stmts {
		d := s.stmts.adoptNamed(ms.Name, ms.Query, ms.Types)
		srv.stmts.add(s.stmts, d, d.epoch.Load())
		s.stmts.release(d)
	}
	if m.link != 0 {
		// Its client's session goes on here: what it SET is not known,
		// so the parameters are set again when it next goes to another
		// client (syncParams).
		srv.unreportedDirty = true
		p.adoptLinked(srv)
		return srv, nil
	}
	p.loggedIn(srv)
	return srv, nil
}

// adoptLinked counts a server taken over linked to a client among the
// pool's servers, active: it is that client's until it leaves.
func (p *serverPool) adoptLinked(srv *server) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.servers == nil {
		p.servers = map[*server]struct{}{}
	}
	p.servers[srv] = struct{}{}
	srv.lifeDraw = lifetimeDraw()
	if p.welcome == nil {
		p.welcome = make(map[string]string, len(srv.params))
		for k, v := range srv.params {
			p.welcome[k] = v
		}
	}
	p.setServerStateLocked(srv, serverActive)
}

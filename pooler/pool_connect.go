package pooler

import (
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/internal/loginfail"
	"github.com/pgturnstile/pgturnstile/internal/tlsset"
)

// A new server's login (serverPool.connect, started by
// startConnectLocked) and its three endings.

// connect logs in s, a new server in state login, and hands it to the
// first waiter.
func (p *serverPool) connect(s *server) {
	if s.fromReserve {
		p.log.Info("taking connection from reserve_pool")
	}
	p.serverDebugf(s, "launching new connection to server")
	err := p.logIn(s)
	switch {
	case errors.Is(err, errDialAborted):
		p.loginAborted(s)
	case err != nil:
		p.loginFailed(s, err)
	default:
		p.loggedIn(s)
	}
}

// logIn dials s and logs it in, then runs the database's connect_query
// on it. A failed connect_query is only logged; a query that could not be
// run at all fails the login and closes s.
func (p *serverPool) logIn(s *server) error {
	st := p.svc.settings()
	err := dialServer(p, s, st.ServerConnectTimeout)
	if err == nil {
		if err = p.checkSessionAttrs(s, st.ServerConnectTimeout); err != nil {
			s.conn.Close()
			return err
		}
	}
	if err == nil && s.target.db.ConnectQuery != "" {
		if res, qerr := s.exec(s.target.db.ConnectQuery, st.ServerConnectTimeout); qerr != nil {
			s.conn.Close()
			err = qerr
		} else if res.err != nil {
			p.serverLogger(s).Warn("connect_query failed: " + res.err.Message)
		}
	}
	return err
}

// loginAborted ends a login that nobody waits for any more
// (errDialAborted): not a failure, so no error is recorded or told.
func (p *serverPool) loginAborted(s *server) {
	p.mu.Lock()
	p.setServerStateLocked(s, serverClosed)
	p.regrowLocked(p.svc.clock.Now())
	p.mu.Unlock()
	p.svc.changes.Notify() // PAUSE waits for p.total to fall
	p.dbLimit.Give()
	p.userLimit.Give()
	p.svc.wakeLimited(p.dbLimit, p.userLimit)
}

// loginFailed ends a failed login: the error is recorded for the pool's
// next logins and, when Postgres refused the login
// (loginfail.FailsWaiters), told to every waiter; otherwise they keep
// waiting for the janitor's retry after server_login_retry.
func (p *serverPool) loginFailed(s *server, err error) {
	p.mu.Lock()
	p.setServerStateLocked(s, serverClosed)
	p.syncGateLocked()
	if p.noteLoginLocked(err) {
		// Another host of the list may answer, or suit
		// target_session_attrs: tried now, not after
		// server_login_retry.
		p.lastLoginErr = nil
		p.regrowLocked(p.svc.clock.Now())
	} else {
		p.lastLoginErr = err
		p.lastLoginErrAt = p.svc.clock.Now()
	}
	// Every waiter gets the server's own error now (as PgBouncer
	// forwards it) when the server refused the login.
	var waiters []*poolWaiter
	if loginfail.FailsWaiters(err) {
		for w := p.queue.pop(); w != nil; w = p.queue.pop() {
			waiters = append(waiters, w)
		}
		p.queued.Store(0)
	}
	p.mu.Unlock()
	p.svc.changes.Notify() // PAUSE waits for p.total to fall
	p.dbLimit.Give()
	p.userLimit.Give()
	// PgBouncer's words for the server it gave up on ("closing
	// because: connect failed"), the Go error (address, system error) as
	// the detail.
	if se := (*auth.ServerError)(nil); errors.As(err, &se) {
		// PgBouncer's line for a refusal: the server's own words, with
		// no prefix (its log_warning).
		p.svc.log.Warn("server login failed: " + se.Fields.Severity + " " + se.Fields.Message)
	}
	p.serverLogger(s).Warn("server login failed: closing because: " + loginfail.Reason(err) + " (" + err.Error() + ")")
	p.metrics.loginFailures.Inc()
	werr := loginfail.ClientError(err)
	for _, w := range waiters {
		w.give(grant{err: werr})
	}
}

// loggedIn adds s, logged in, to the pool and hands it to the first
// waiter; a pool paused or over a lowered limit meanwhile closes it.
func (p *serverPool) loggedIn(s *server) {
	p.mu.Lock()
	p.lastLoginErr = nil
	p.noteLoginLocked(nil)
	if p.servers == nil {
		p.servers = map[*server]struct{}{}
	}
	p.servers[s] = struct{}{}
	s.lifeDraw = lifetimeDraw()
	stale := !s.target.sameServers(p.target.Load()) || tlsset.ServerChanged(s.serverTLS, p.svc.gen.Load().sec.ServerTLS)
	if p.paused || stale || p.overLimitLocked() {
		p.setServerStateLocked(s, serverClosed)
		p.regrowLocked(p.svc.clock.Now())
		p.mu.Unlock()
		reason := "limit lowered"
		switch {
		case p.paused:
			reason = reasonPause
		case stale:
			// RELOAD retargeted the pool (or changed server_tls_*)
			// while this one logged in; regrowLocked started its
			// replacement.
			reason = reasonConfigChanged
		}
		p.closeServer(s, reason)
		return
	}
	if p.welcome == nil {
		p.welcome = make(map[string]string, len(s.params))
		for k, v := range s.params {
			p.welcome[k] = v
		}
	}
	p.metrics.connects.Inc()
	// PgBouncer's line: S-n: db/user@server new connection to server
	// (from local address). Built now: s may be another client's once
	// p.mu is released.
	log := p.serverLoggerAt(s, s.conn.RemoteAddr().String())
	line := "new connection to server (from " + s.conn.LocalAddr().String() + ")"
	p.handOffLocked(s)
	p.regrowLocked(p.svc.clock.Now())
	p.mu.Unlock()
	if p.svc.logConnections() {
		log.Info(line)
	}
}

// serverTLSChanged follows a change of server_tls_* (SET, RELOAD), after
// which PgBouncer tags every pool dirty: no server keeps a connection made
// with the old settings (a plaintext one once TLS is required). Servers
// logging in are closed by loggedIn, whose check sees their serverTLS
// stale. The cached login error is forgotten: the change may have fixed
// its cause.
func (p *serverPool) serverTLSChanged() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastLoginErr = nil
	p.doomAllLocked()
}

// doomAllLocked marks every logged-in server for closing because the
// configuration it connected with changed: idle ones close at the pool's
// next maintain, busy ones when released, without waiting for a close
// token (mayCloseLocked).
func (p *serverPool) doomAllLocked() {
	for s := range p.servers {
		if !s.closeNeeded {
			s.closeNeeded = true
			s.doomReason = reasonConfigChanged
		}
	}
}

// setCredentials updates the secret new servers log in with, and the SCRAM
// ClientKey a client proved against it (kept until a new secret comes).
func (p *serverPool) setCredentials(secret *auth.Secret, clientKey []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cred.Secret == nil || !sameSecret(p.cred.Secret, secret) {
		p.cred.Secret = secret
		p.cred.ClientKey = nil
	}
	if len(clientKey) > 0 {
		p.cred.ClientKey = clientKey
	}
}

func sameSecret(a, b *auth.Secret) bool {
	return a.Kind == b.Kind && a.Plain == b.Plain && a.MD5 == b.MD5 &&
		a.Iterations == b.Iterations && string(a.Salt) == string(b.Salt) &&
		string(a.StoredKey) == string(b.StoredKey) && string(a.ServerKey) == string(b.ServerKey)
}

func (p *serverPool) credentials() auth.ServerCredentials {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cred
}

// startDial registers a login in flight; false if the pool is over its
// limit already (the login is not worth starting).
func (p *serverPool) startDial(conn net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	if p.dials == nil {
		p.dials = map[net.Conn]bool{}
	}
	p.dials[conn] = false
	return true
}

// endDial forgets a login and reports whether shrink aborted it.
func (p *serverPool) endDial(conn net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	aborted := p.dials[conn]
	delete(p.dials, conn)
	return aborted
}

func formatAge(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 0, 64) + "s"
}

package pooler

// Host lists and target_session_attrs: which host of a [databases]
// entry's host=a,b,c a new server dials (load_balance_hosts), whether the
// server it reaches is one the entry accepts (target_session_attrs, as
// libpq checks it), and recycling the servers of a host that changed role
// (a failover), so a read-write database follows its primary.

import (
	"errors"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/loginfail"
	"github.com/pgturnstile/pgturnstile/internal/sessionattrs"
)

// hostChoice is a pool's state for choosing hosts; guarded by
// serverPool.mu.
type hostChoice struct {
	// rr is PgBouncer's round-robin counter: a login dials
	// endpoints[rr % n]. round-robin advances it at every login; disable
	// only after a failed one, so logins stay on one host until it fails.
	rr uint
	// lastFailed: the pool's last login failed (disable moves on).
	lastFailed bool
	// proven: a login to the current host succeeded since the last
	// failure. With disable, a host not yet proven gets one login at a
	// time, so one failure moves every later login to the next host.
	proven bool
	// fails counts logins in a row that failed: refused, unreachable, or
	// reaching a server the entry's target_session_attrs refused. Until
	// a whole round of the host list has failed, the next host is tried
	// at once rather than after server_login_retry (a failover costs no
	// retry interval); prefer-standby, after a round with no standby,
	// takes any server.
	fails int
}

// pickEndpointLocked chooses the host of a login about to start, as
// PgBouncer's dns_connect does with a host list.
func (p *serverPool) pickEndpointLocked(t *poolTarget) endpoint {
	n := uint(len(t.endpoints))
	if n == 1 {
		return t.endpoints[0]
	}
	h := &p.hosts
	if t.balance == "disable" && h.lastFailed {
		h.rr++
		h.lastFailed = false
	}
	ep := t.endpoints[h.rr%n]
	if t.balance != "disable" {
		h.rr++
	}
	return ep
}

// probingLocked: with load_balance_hosts = disable, a login is already
// finding out whether the current host answers, and growth waits for it
// (PgBouncer makes one login at a time).
func (p *serverPool) probingLocked() bool {
	t := p.target.Load()
	return len(t.endpoints) > 1 && t.balance == "disable" && !p.hosts.proven && p.connecting > 0
}

// noteLoginLocked records how a login ended for the host choice; it
// reports whether the next login should start at once (a host list with
// hosts of the round still untried) instead of after server_login_retry.
// A single host keeps PgBouncer's retry interval.
func (p *serverPool) noteLoginLocked(err error) (retryNow bool) {
	h := &p.hosts
	if err == nil {
		h.lastFailed, h.proven, h.fails = false, true, 0
		return false
	}
	h.lastFailed, h.proven = true, false
	h.fails++
	t := p.target.Load()
	if t.attrs == "prefer-standby" && errors.Is(err, sessionattrs.ErrNotMet) {
		// After a round with no standby, one more login takes any
		// server (checkSessionAttrs).
		return h.fails <= len(t.endpoints)
	}
	return h.fails < len(t.endpoints)
}

// checkSessionAttrs checks a new server against the target's
// target_session_attrs as libpq does: from in_hot_standby and
// default_transaction_read_only, which PostgreSQL 14 and later report at
// login, else by asking (SHOW transaction_read_only, or
// pg_is_in_recovery()). A server that fails is closed by the caller.
func (p *serverPool) checkSessionAttrs(s *server, timeout time.Duration) error {
	attrs := s.target.attrs
	if attrs == "" || attrs == "any" {
		return nil
	}
	_, hsKnown := s.params["in_hot_standby"]
	_, roKnown := s.params["default_transaction_read_only"]
	if !hsKnown || !roKnown {
		// An older server: ask it.
		sql := sessionattrs.Probe(attrs)
		res, err := s.exec(sql, timeout)
		if err != nil {
			return err
		}
		if res.err != nil || !res.hasValue {
			return &loginfail.ReasonError{Reason: sessionattrs.Reason, Err: sessionattrs.NotMet("could not check the server's role: " + sql)}
		}
		on := res.value == "on" || res.value == "t"
		s.readOnly.Store(on)
		s.hotStandby.Store(on && sql != "SHOW transaction_read_only")
	}
	p.mu.Lock()
	fallback := attrs == "prefer-standby" && p.hosts.fails >= len(s.target.endpoints)
	p.mu.Unlock()
	if why := sessionattrs.Mismatch(attrs, s.readOnly.Load(), s.hotStandby.Load()); why != "" && !fallback {
		return &loginfail.ReasonError{Reason: sessionattrs.Reason, Err: sessionattrs.NotMet(why + " (target_session_attrs=" + attrs + ")")}
	}
	return nil
}

// noteReadOnly mirrors the role the server reports (PostgreSQL 14 and
// later): in_hot_standby, and default_transaction_read_only, at login and
// whenever they change (a promotion, a reload).
func (s *server) noteReadOnly() {
	hs, hsKnown := s.params["in_hot_standby"]
	ro, roKnown := s.params["default_transaction_read_only"]
	if !hsKnown && !roKnown {
		return
	}
	s.hotStandby.Store(hs == "on")
	s.readOnly.Store(hs == "on" || ro == "on")
}

// wrongRole: a server whose host changed role since its login (a primary
// became read-only or a standby, a standby was promoted) and no longer
// suits the entry's target_session_attrs; it is closed when next
// released or found idle, so new servers find the right host. Any
// goroutine (the mirrors are atomic). prefer-standby keeps what it has.
func (s *server) wrongRole() bool {
	attrs := s.target.attrs
	if attrs == "" || attrs == "any" || attrs == "prefer-standby" {
		return false
	}
	return sessionattrs.Mismatch(attrs, s.readOnly.Load(), s.hotStandby.Load()) != ""
}

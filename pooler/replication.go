package pooler

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/loginfail"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
	"github.com/pgturnstile/pgturnstile/wire"
)

// Replication connections (replication=true|database in the startup
// packet, PgBouncer 1.23): not pooled. The client logs in as any other
// (auth_hba_file's replication keyword matches a physical one), then
// waits for room in its pool (pool_size and the database and user caps,
// an idle server of the pool evicted to make it) and gets a server of its
// own, logged in with replication, the client's parameters and its
// options as they were given (physical walsenders take no SET). The
// welcome is that server's; from then on the two are relayed message by
// message, unread, until either side ends, and the server is closed
// with its client (pool_replication.go).

// replication is the kind of a replication connection.
type replication uint8

const (
	replNone     replication = iota
	replLogical              // replication=database
	replPhysical             // replication=true (or yes, on, 1)
)

// parseReplication reads the startup parameter as PgBouncer does:
// "database" is logical, a boolean says physical or none, and anything
// else leaves the connection an ordinary one.
func parseReplication(v string) replication {
	if v == "database" {
		return replLogical
	}
	switch strings.ToLower(v) {
	case "1", "yes", "on", "true":
		return replPhysical
	}
	return replNone
}

// show is the replication column of SHOW CLIENTS and SHOW SERVERS.
func (r replication) show() string {
	switch r {
	case replLogical:
		return "logical"
	case replPhysical:
		return "physical"
	}
	return "none"
}

// param is the value of the replication startup parameter a server of
// this kind logs in with (PgBouncer's replication_type_parameters).
func (r replication) param() string {
	switch r {
	case replLogical:
		return "database"
	case replPhysical:
		return "yes"
	}
	return "no"
}

// replicationStartup is what a replication client's server logs in with
// beyond its pool's own startup parameters: replication, the parameters
// the client gave (in a stable order) and its options unchanged.
func (c *client) replicationStartup(startup map[string]string) []wire.Param {
	out := []wire.Param{{Name: "replication", Value: c.repl.param()}}
	names := make([]string, 0, len(startup))
	for k := range startup {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		out = append(out, wire.Param{Name: k, Value: startup[k]})
	}
	if c.replOptions != nil {
		out = append(out, wire.Param{Name: "options", Value: *c.replOptions})
	}
	return out
}

// replicationLogin ends the login of a replication client: it joins its
// pool in session mode, waits for a server of its own, and gets that
// server's welcome. A server that refuses the login fails the client with
// Postgres's ErrorResponse, as an ordinary login does (replicationLoginError).
func (c *client) replicationLogin(st *config.Settings, pool *serverPool, startup map[string]string) error {
	if st.ApplicationNameAddHost {
		startup["application_name"] += " - " + c.conn.RemoteAddr().String()
	}
	c.pool = pool
	c.mode = config.PoolModeSession
	c.enterPool()
	c.params = startup
	if err := c.svc.newCancelKey(&c.key); err != nil {
		return err
	}
	c.svc.registerCancel(c)
	pool.stats.logins.Add(1)

	c.mu.Lock()
	c.setStateLocked(clientIdle)
	c.setStateLocked(clientWaiting)
	c.mu.link.mu.pool = pool // its own server's, as a cancel request reads it
	c.mu.link.mu.waitStart = c.svc.clock.Now()
	if c.mu.link.mu.cancelWait == nil {
		c.mu.link.mu.cancelWait = make(chan struct{}, 1)
	}
	if c.mu.link.mu.poolWait == nil {
		// Never queued: a cancel request finds it not waiting there and
		// signals cancelWait, which the replication wait hears.
		c.mu.link.mu.poolWait = &poolWaiter{grant: make(chan grant, 1)}
	}
	c.mu.Unlock()

	s, err := pool.openReplication(c, c.replicationStartup(startup), st.QueryWaitTimeout)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.mu.link.linkSrvLocked(s)
	c.setStateLocked(clientActive)
	c.mu.Unlock()
	s.linkedTo.Store(c.id)

	c.scratch = c.appendReplicationWelcome(c.scratch[:0], s)
	err = c.w.Write(c.scratch)
	c.scratch = nil
	if err == nil {
		err = c.w.Flush()
	}
	if err != nil {
		c.endReplication(s, "client unexpected eof")
		return err
	}
	c.conn.SetDeadline(time.Time{})
	c.r.SetMaxMessageSize(clientMaxMessage(st))
	return nil
}

// appendReplicationWelcome is the welcome of a replication client: its
// server's parameters as that server reported them, the client's own
// cancel key, ReadyForQuery.
func (c *client) appendReplicationWelcome(out []byte, s *server) []byte {
	out = wire.AppendAuthenticationOk(out)
	names := make([]string, 0, len(s.params))
	for k := range s.params {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		out = wire.AppendParameterStatus(out, k, s.params[k])
	}
	out = wire.AppendBackendKeyData(out, c.key)
	return wire.AppendReadyForQuery(out, wire.TxIdle)
}

// serveReplication relays between a logged-in replication client and its
// server until either ends, then closes both. Whichever side ends first
// names the reason; closing the other side's socket ends its relay.
func (c *client) serveReplication() {
	defer func() {
		if r := recover(); r != nil {
			c.logger().Error(fmt.Sprintf("panic in client: %v", r))
		}
		c.conn.Close()
		c.svc.clientClosed(c)
	}()
	c.mu.Lock()
	s := c.mu.link.mu.srv
	c.mu.Unlock()
	const (
		clientFirst int32 = iota + 1
		serverFirst
	)
	// first is the side whose end ended the link; a failed write is the
	// end of the side written to.
	var first atomic.Int32
	serverDone := make(chan struct{})
	go func() {
		defer close(serverDone)
		_, writeFailed, _ := wire.Relay(s.r, c.w, &s.pool.stats.sent)
		if writeFailed {
			if first.CompareAndSwap(0, clientFirst) {
				s.conn.Close()
			}
			c.conn.Close()
			return
		}
		if first.CompareAndSwap(0, serverFirst) {
			// Wakes serve's read of the client, which is then told why.
			c.conn.SetReadDeadline(time.Now())
		}
	}()
	lastClient, writeFailed, errClient := wire.Relay(c.r, s.w, &s.pool.stats.received)
	side := clientFirst
	if writeFailed {
		side = serverFirst
	}
	if first.CompareAndSwap(0, side) {
		s.conn.Close()
		if side == serverFirst {
			c.conn.SetReadDeadline(time.Now())
		}
	}
	s.conn.Close()
	<-serverDone
	// A Terminate the client sent closes the server, whose end may be
	// seen first: the client still ended the link.
	serverEnded := first.Load() == serverFirst && lastClient != wire.MsgTerminate
	reason := "replication client disconnected"
	if serverEnded {
		// The server went away, or the pooler closed it (close_needed:
		// replEnd); the client hears it in PgBouncer's words.
		reason = "server conn crashed?"
		if r := s.replEnd.Load(); r != nil {
			reason = *r
		}
	}
	switch {
	case serverEnded:
		c.closingBecause(reason)
	case lastClient != wire.MsgTerminate && !errors.Is(errClient, io.EOF) && !errors.Is(errClient, net.ErrClosed):
		c.closingBecause("client unexpected eof")
	default:
		c.closingBecause("client close request")
	}
	if serverEnded {
		c.conn.SetWriteDeadline(time.Now().Add(time.Second))
		pe := &pgerror.Error{Severity: "FATAL", SQLState: "08P01", Message: reason}
		c.w.Write(pgerror.Append(nil, pe))
		c.w.Flush()
	}
	c.endReplication(s, reason)
}

// endReplication unlinks the client's server and closes it.
func (c *client) endReplication(s *server, reason string) {
	c.mu.Lock()
	if c.mu.link != nil && c.mu.link.mu.srv == s {
		c.mu.link.mu.srv = nil
		if c.mu.state == clientActive {
			c.setStateLocked(clientIdle)
		}
	}
	c.mu.Unlock()
	s.pool.closeReplication(s, reason)
}

// replicationLoginError is what a replication client is told when its
// server's login failed. A refusal by Postgres (no replication role, no
// hba line for replication) is PgBouncer's FATAL "login failed", which
// its users' checks read, with Postgres's SQLSTATE and its words as the
// DETAIL, where PgBouncer gives the client no reason; the log line is
// PgBouncer's ("S: login failed: ..."), and so are the closing lines
// ("login failed"). Unlike an ordinary login's refusal it fails no other
// client: the pool's ordinary logins may well succeed. Other failures are
// as for any client (loginfail.ClientError).
func replicationLoginError(p *serverPool, s *server, err error) error {
	var se *auth.ServerError
	if errors.As(err, &se) {
		p.serverLogger(s).Error("S: login failed: " + se.Fields.Severity + ": " + se.Fields.Message)
		e := pgerror.New(pgerror.LoginFailed)
		if se.Fields.Code != "" {
			e.SQLState = se.Fields.Code
		}
		e.Detail = se.Fields.Message
		return e
	}
	return loginfail.ClientError(err)
}

package pooler

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/wire"
)

// The sharding router's glue (shard_file; the rules are package shard's
// and docs/sharding.md's). A client that logs in with a cluster's name is
// a client of the cluster's default database (its home pool: counts, caps,
// settings, login) with a shardSession. The transaction's pool is chosen
// in route, at the one point where a link about to need a server has none
// (link.mu.route, which linkServer takes): the first statement of a
// transaction decides its shard, and every later statement of it is held
// to that shard. What the pooler answers itself for a cluster's client: a
// BEGIN before the transaction's first statement (held, and sent ahead of
// that statement on the shard it picks), COMMIT or ROLLBACK of a
// transaction that never reached a server, SET pgturnstile.*, and every
// refusal (0A000, nothing sent to any server).

// shardSession is what a client of a sharded cluster keeps between
// transactions. Only serve's goroutine touches it.
type shardSession struct {
	cluster string // the cluster's name, as the client gave it
	// router is the cluster's router under the map it was made from
	// (routerOf); remade when a RELOAD brings another map.
	router   *shard.Router
	routerOf *shard.Cluster
	// pin is SET pgturnstile.* for the session (and the startup
	// options); local is SET LOCAL's, for the transaction.
	pin, local shard.Pin
	// pins counts changes of pin and local: a statement prepared under
	// other pins is prepared again at its Bind.
	pins uint64
	// held is a BEGIN the pooler answered while no server was linked:
	// its Query message, sent ahead of the transaction's first statement.
	held []byte
	// pools are the shard pools the client has used, pinned (poolfree.go)
	// until it leaves.
	pools map[string]*serverPool
	// secret and clientKey are what the client proved at login, for the
	// server logins of shard pools without a user of their own, as the
	// home pool has them (authenticateForPool).
	secret    *auth.Secret
	clientKey []byte
	// stmts: the routing part of the client's prepared statements, by
	// the client's name ("" for the unnamed one): what a later Bind needs.
	stmts map[string]stmtRoute
	// last is the database of the client's last transaction, where a
	// Parse or Describe that decides nothing goes.
	last string
	out  []byte
	// tally counts the decisions into Service.routes.
	tally *shard.Tally
}

// stmtRoute is a Parse's routing: final (d), or decided by its Binds (p),
// under the map of cluster of; a Bind after a RELOAD brought another map
// prepares the text again.
type stmtRoute struct {
	d    shard.Decision
	p    *shard.Prepared
	of   *shard.Cluster
	pins uint64
	text string
}

// shardDecision is what route learned before it took c.mu: whether the
// router has a say on this message and, if so, its decision.
type shardDecision struct {
	active bool
	d      shard.Decision
	// undecided: the message touches no rows and says nothing of the
	// transaction's shard (a Parse whose Bind has not come): it runs
	// where the client's last transaction ran, outside a held one.
	undecided bool
}

// clusterLogin makes a login to a sharded cluster's name one to its
// default database; ok is false when name is no cluster.
func (c *client) clusterLogin(g *generation) (db *config.Database, ok bool) {
	if g.shards == nil {
		return nil, false
	}
	cl := g.shards.Cluster(c.dbName)
	if cl == nil {
		return nil, false
	}
	db, ok = g.cfg.LookupDatabase(cl.DefaultDatabase)
	if !ok {
		return nil, false // the map was checked against cfg: not reached
	}
	c.shard = &shardSession{cluster: cl.Name, pin: c.startPin, pools: map[string]*serverPool{}, stmts: map[string]stmtRoute{},
		tally: shard.NewTally(&c.svc.routes)}
	return db, true
}

// routerNow returns the router of the client's cluster in the map in
// force, nil when a RELOAD removed the cluster.
func (ss *shardSession) routerNow(g *generation) *shard.Router {
	var cl *shard.Cluster
	if g.shards != nil {
		cl = g.shards.Cluster(ss.cluster)
	}
	if cl == nil {
		return nil
	}
	if ss.routerOf != cl {
		ss.router, ss.routerOf = shard.NewRouter(cl), cl
	}
	return ss.router
}

// pinNow is the pin in force: SET LOCAL's over the session's.
func (ss *shardSession) pinNow() shard.Pin {
	p := ss.pin
	if ss.local.Key != nil {
		p.Key, p.Colo = ss.local.Key, ss.local.Colo
	}
	if ss.local.Shard != "" {
		p.Shard = ss.local.Shard
	}
	return p
}

// shardDecide reads a cluster client's Query, Parse or Bind and decides
// where it runs, before route takes c.mu; messages that need no decision
// are not active. It answers what the pooler answers itself (SET
// pgturnstile.*, a held transaction's control statements) and returns
// stepNext for those.
func (l *link) shardDecide(typ byte, n int) (shardDecision, loopStep) {
	c := l.c
	ss := c.shard
	c.mu.Lock()
	for l.mu.releasing {
		// The pump is handing back the server of the client's last
		// transaction, whose ReadyForQuery the client has: this message
		// is not part of that transaction (a BEGIN is held, not sent
		// to the default database; route waits the same way).
		l.mu.releaseDone.Wait()
	}
	skipping := l.mu.skipToSync
	idle := l.mu.srv == nil && !l.mu.releasing || l.mu.ls.idle() && l.mu.ls.txStatus == wire.TxIdle
	escapeStrings := settingOff(c.params["standard_conforming_strings"])
	c.mu.Unlock()
	if skipping {
		return shardDecision{}, stepOn // dropped up to the Sync anyway
	}
	if idle && ss.held == nil && !ss.local.Empty() {
		ss.local = shard.Pin{} // SET LOCAL's transaction is over
		ss.pins++
	}
	r := ss.routerNow(c.svc.gen.Load())
	if r != nil {
		// The session's standard_conforming_strings, as the pump last
		// heard it: with off, '…' takes backslash escapes, for the
		// router as for Postgres.
		r.SetEscapeStrings(escapeStrings)
	}
	switch typ {
	case wire.MsgQuery:
		text, err := l.shardText(n)
		if err != nil {
			return shardDecision{}, c.leaveStep(err)
		}
		if r == nil {
			return shardDecision{active: true, d: goneCluster}, stepOn
		}
		if step, answered := l.answerShardQuery(text); answered {
			return shardDecision{}, step
		}
		return shardDecision{active: true, d: r.Route(text, ss.pinNow(), c.mayTarget(r.Cluster()))}, stepOn
	case wire.MsgParse:
		body, err := l.shardText(n)
		if err != nil {
			return shardDecision{}, c.leaveStep(err)
		}
		if r == nil {
			return shardDecision{active: true, d: goneCluster}, stepOn
		}
		name, rest, ok := cstring(body)
		text, _, ok2 := cstring(rest)
		if !ok || !ok2 {
			return shardDecision{}, stepOn // malformed: the pooler's own checks answer it
		}
		d, p := r.Prepare(text, ss.pinNow(), c.mayTarget(r.Cluster()))
		ss.stmts[string(name)] = stmtRoute{d: d, p: p, of: r.Cluster(), pins: ss.pins, text: string(text)}
		undecided := false
		if d.Pending {
			// Decided by the Bind of this statement pipelined behind
			// it, when it has arrived; else where the client's last
			// transaction ran (a Parse touches no rows).
			d, undecided = l.bindAhead(name, p)
		}
		return shardDecision{active: true, d: d, undecided: undecided}, stepOn
	case wire.MsgBind:
		body, err := l.shardText(n)
		if err != nil {
			return shardDecision{}, c.leaveStep(err)
		}
		if r == nil {
			return shardDecision{active: true, d: goneCluster}, stepOn
		}
		return shardDecision{active: true, d: l.bindDecision(body)}, stepOn
	case wire.MsgClose:
		if body, err := c.r.Peek(n); err == nil && len(body) > 1 && body[0] == 'S' {
			if name, _, ok := cstring(body[1:]); ok {
				delete(ss.stmts, string(name))
			}
		}
	}
	return shardDecision{}, stepOn
}

// settingOff reports a boolean setting's value that Postgres reads as
// false (parse_bool: off, false, no, 0 and their unambiguous prefixes).
func settingOff(v string) bool {
	v = strings.ToLower(strings.TrimSpace(v))
	switch {
	case v == "0":
		return true
	case len(v) >= 2 && strings.HasPrefix("off", v):
		return true
	case v != "" && (strings.HasPrefix("false", v) || strings.HasPrefix("no", v)):
		return true
	}
	return false
}

// goneCluster is the decision for a client whose cluster a RELOAD
// removed from the shard file.
var goneCluster = shard.Decision{Source: shard.SourceRefused, Reason: shard.ReasonShape}

// leaveStep ends a client whose message could not be read.
func (c *client) leaveStep(err error) loopStep {
	c.leave(err)
	return stepEnd
}

// shardText returns the current message's body whole, growing the read
// buffer for one longer than it up to the scanner's limit; a longer one
// is returned in part, which the router refuses as too long unless a
// leading hint routes it.
func (l *link) shardText(n int) ([]byte, error) {
	c := l.c
	if !c.r.Fits() && n+5 <= shard.DefaultScanLimit+5 {
		c.r.Grow(n + 5)
	}
	body, err := c.r.Peek(n)
	if err != nil {
		return nil, err
	}
	if len(body) < n {
		// Beyond the scan limit: pad the view past it so the scanner
		// refuses it rather than read a statement cut short.
		return append(append(l.c.shard.out[:0], body...), make([]byte, shard.DefaultScanLimit)...), nil
	}
	if c.r.Type() == wire.MsgQuery && len(body) > 0 && body[len(body)-1] == 0 {
		body = body[:len(body)-1]
	}
	return body, nil
}

// mayTarget: admin users and the cluster's target_users may name a shard.
func (c *client) mayTarget(cl *shard.Cluster) bool {
	return cl.MayTarget(c.user) || slices.Contains(c.svc.config().Settings.AdminUsers, c.user)
}

// bindAhead looks for the Bind of statement name among the messages the
// client pipelined behind its Parse, up to the batch's Sync, and decides
// by its parameters; without one the Parse goes where the client's last
// transaction ran.
func (l *link) bindAhead(name []byte, p *shard.Prepared) (d shard.Decision, undecided bool) {
	ss := l.c.shard
	ahead := l.c.r.Ahead()
	for len(ahead) >= 5 {
		typ := ahead[0]
		mlen := int(binary.BigEndian.Uint32(ahead[1:5]))
		if mlen < 4 || len(ahead) < 1+mlen {
			break
		}
		body := ahead[5 : 1+mlen]
		ahead = ahead[1+mlen:]
		switch typ {
		case wire.MsgSync, wire.MsgParse:
			// The batch ends, or another Parse may replace the statement.
			return ss.lastDecision(), true
		case wire.MsgBind:
			_, rest, ok := cstring(body)
			stmt, _, ok2 := cstring(rest)
			if !ok || !ok2 || !bytes.Equal(stmt, name) {
				continue
			}
			d, err := p.Bind(bindParams(body))
			if err != nil {
				return shard.Decision{Source: shard.SourceRefused, Reason: shard.ReasonShape}, false
			}
			return d, false
		}
	}
	return ss.lastDecision(), true
}

// lastDecision sends what decides nothing (a Parse, a Describe) where the
// client's last transaction ran, or to the default database.
func (ss *shardSession) lastDecision() shard.Decision {
	db := ss.last
	if db == "" && ss.routerOf != nil {
		db = ss.routerOf.DefaultDatabase
	}
	return shard.Decision{Source: shard.SourceDefault, Database: db}
}

// bindDecision decides a Bind by its statement's routing.
func (l *link) bindDecision(body []byte) shard.Decision {
	ss := l.c.shard
	_, rest, ok := cstring(body)
	stmt, _, ok2 := cstring(rest)
	if !ok || !ok2 {
		return shard.Decision{}
	}
	sr, known := ss.stmts[string(stmt)]
	if !known {
		// Prepared some other way (SQL PREPARE, before the map had the
		// cluster): nothing says where its rows are.
		return shard.Decision{Source: shard.SourceRefused, Reason: shard.ReasonShape}
	}
	if sr.of != ss.routerOf || sr.pins != ss.pins {
		// Prepared under an earlier map (its ranges may have moved) or
		// other pins.
		sr.d, sr.p = ss.router.Prepare([]byte(sr.text), ss.pinNow(), l.c.mayTarget(ss.routerOf))
		sr.of, sr.pins = ss.routerOf, ss.pins
		ss.stmts[string(stmt)] = sr
	}
	if sr.p == nil {
		return sr.d
	}
	d, err := sr.p.Bind(bindParams(body))
	if err != nil {
		return shard.Decision{Source: shard.SourceRefused, Reason: shard.ReasonShape}
	}
	return d
}

// bindParams reads a Bind body's parameters for shard.Prepared.Bind.
type bindParams []byte

// Param returns parameter i: its bytes, binary format, NULL; ok false when
// the Bind has fewer (or is malformed, which Postgres then refuses).
func (b bindParams) Param(i int) (value []byte, binary, null, ok bool) {
	_, rest, ok1 := cstring(b)
	_, rest, ok2 := cstring(rest)
	if !ok1 || !ok2 || len(rest) < 2 {
		return nil, false, false, false
	}
	nfmt := int(be16(rest))
	rest = rest[2:]
	if len(rest) < 2*nfmt+2 {
		return nil, false, false, false
	}
	fmts := rest[:2*nfmt]
	rest = rest[2*nfmt:]
	nparams := int(be16(rest))
	rest = rest[2:]
	if i >= nparams {
		return nil, false, false, false
	}
	switch {
	case nfmt == 1:
		binary = be16(fmts) == 1
	case nfmt > i:
		binary = be16(fmts[2*i:]) == 1
	}
	for j := 0; ; j++ {
		if len(rest) < 4 {
			return nil, false, false, false
		}
		vlen := int32(binary32(rest))
		rest = rest[4:]
		if vlen < 0 {
			if j == i {
				return nil, binary, true, true
			}
			continue
		}
		if int(vlen) > len(rest) {
			return nil, false, false, false
		}
		if j == i {
			return rest[:vlen], binary, false, true
		}
		rest = rest[vlen:]
	}
}

func be16(b []byte) uint16     { return binary.BigEndian.Uint16(b) }
func binary32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }

// cstring splits a NUL-terminated string off b.
func cstring(b []byte) (s, rest []byte, ok bool) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return nil, nil, false
	}
	return b[:i], b[i+1:], true
}

// answerShardQuery answers, with no server linked, the simple queries the
// pooler answers itself for a cluster's client: SET [LOCAL]
// pgturnstile.*, and BEGIN, COMMIT, ROLLBACK while the transaction has
// not reached a server. answered is false for any other.
func (l *link) answerShardQuery(text []byte) (loopStep, bool) {
	c := l.c
	ss := c.shard
	c.mu.Lock()
	linked := l.mu.srv != nil || l.mu.releasing
	c.mu.Unlock()
	if sh, found, err := shard.ReadSet(text); found {
		if err != nil {
			return l.refuseShard(wire.MsgQuery, shard.Decision{Source: shard.SourceRefused, Reason: shard.ReasonBadHint}), true
		}
		var notice []byte
		inTx := ss.held != nil || linked
		switch {
		case sh.Local && !inTx:
			// As Postgres: a warning, and nothing set.
			notice = wire.AppendErrorResponse(nil, wire.MsgNoticeResponse, "WARNING", "25P01", "SET LOCAL can only be used in transaction blocks", "", "")
		case sh.Local:
			setPin(&ss.local, sh)
			ss.pins++
		default:
			setPin(&ss.pin, sh)
			ss.pins++
		}
		return l.answerShard(append(notice, wire.AppendCommandComplete(nil, "SET")...)), true
	}
	if linked {
		return stepOn, false
	}
	kind, start := shard.ReadTxControl(text)
	switch {
	case kind == shard.TxBegin && ss.held == nil:
		ss.held = wire.AppendQuery(nil, string(text))
		return l.answerShard(wire.AppendCommandComplete(nil, kind.Tag(start))), true
	case kind == shard.TxBegin:
		notice := wire.AppendErrorResponse(nil, wire.MsgNoticeResponse, "WARNING", "25001", "there is already a transaction in progress", "", "")
		return l.answerShard(append(notice, wire.AppendCommandComplete(nil, kind.Tag(start))...)), true
	case kind != shard.TxNone && ss.held != nil:
		// The transaction never reached a server: nothing to commit.
		ss.held, ss.local = nil, shard.Pin{}
		ss.pins++
		return l.answerShard(wire.AppendCommandComplete(nil, kind.Tag(false))), true
	}
	return stepOn, false
}

// setPin applies a SET or RESET of pgturnstile.* to a pin.
func setPin(p *shard.Pin, sh shard.SetHint) {
	var v []byte
	if !sh.Reset {
		v = append([]byte(nil), sh.Value...)
	}
	switch sh.Name {
	case "shard_key":
		p.Key = v
	case "colo":
		p.Colo = string(v)
	case "shard":
		p.Shard = string(v)
	}
}

// heldStatus is the transaction status a cluster's client without a
// linked server is in: 'T' while its BEGIN is held.
func (c *client) heldStatus() byte {
	if c.shard != nil && c.shard.held != nil {
		return wire.TxInBlock
	}
	return wire.TxIdle
}

// answerShard consumes the current Query and answers it with out and
// ReadyForQuery.
func (l *link) answerShard(out []byte) loopStep {
	c := l.c
	if err := c.r.Skip(); err != nil {
		return c.leaveStep(err)
	}
	out = wire.AppendReadyForQuery(out, c.heldStatus())
	if err := c.w.Write(out); err != nil {
		return c.leaveStep(err)
	}
	if err := c.w.Flush(); err != nil {
		return c.leaveStep(err)
	}
	return stepNext
}

// shardLink prepares the link of a message that needs a server for the
// decision d, with no server linked: the pool of d's database becomes the
// transaction's (link.mu.route). stepNext when the message was refused
// (answered, nothing sent to a server).
func (l *link) shardLink(typ byte, d shard.Decision) loopStep {
	c := l.c
	ss := c.shard
	g := c.svc.gen.Load()
	cl := ss.routerOf
	if d.Source == shard.SourceRefused || d.Source == shard.SourceScatter || d.Database == "" {
		if d.Source == shard.SourceScatter {
			d = shard.Decision{Source: shard.SourceRefused, Reason: shard.ReasonScatter}
		}
		if d.Database == "" && d.Source != shard.SourceRefused {
			d = shard.Decision{Source: shard.SourceRefused, Reason: shard.ReasonShape}
		}
		return l.refuseShard(typ, d)
	}
	db := d.Database
	if cl != nil && cl.Shadow {
		db = cl.DefaultDatabase // decided and counted, run on the default
	}
	p, err := ss.pool(c, g, db)
	if err != nil {
		return l.refuseShard(typ, shard.Decision{Source: shard.SourceRefused, Reason: shard.ReasonShape})
	}
	ss.last = d.Database
	c.mu.Lock()
	l.mu.route = p
	c.mu.Unlock()
	return stepOn
}

// pool returns the pool of database db for the client, made and pinned
// at its first use.
func (ss *shardSession) pool(c *client, g *generation, db string) (*serverPool, error) {
	if p, ok := ss.pools[db]; ok {
		return p, nil
	}
	if c.pool.key.db == db {
		return c.pool, nil
	}
	entry, ok := g.cfg.LookupDatabase(db)
	if !ok {
		return nil, newError(CodeNoSuchDatabase, db)
	}
	p, err := c.svc.poolFor(entry, c.user)
	if err != nil {
		return nil, err
	}
	if entry.User == "" && ss.secret != nil {
		p.setCredentials(ss.secret, ss.clientKey)
	}
	ss.pools[db] = p
	return p, nil
}

// unpinShardPools lets the janitor free the shard pools the client used.
func (c *client) unpinShardPools() {
	if c.shard == nil {
		return
	}
	for db, p := range c.shard.pools {
		c.svc.unpin(p)
		delete(c.shard.pools, db)
	}
}

// refuseShard answers a statement the router refused: ERROR 0A000 with
// the table and the reason in DETAIL and the ways to name a key in HINT;
// nothing reaches a server and the client stays usable.
func (l *link) refuseShard(typ byte, d shard.Decision) loopStep {
	c := l.c
	if err := c.r.Skip(); err != nil {
		return c.leaveStep(err)
	}
	msg, detail, hint := refusalText(c.shard, d)
	out := wire.AppendErrorResponse(c.shard.out[:0], wire.MsgErrorResponse, "ERROR", "0A000", msg, detail, hint)
	if typ == wire.MsgQuery {
		out = wire.AppendReadyForQuery(out, c.heldStatus())
		c.shard.out = out
		if err := c.w.Write(out); err != nil {
			return c.leaveStep(err)
		}
		if err := c.w.Flush(); err != nil {
			return c.leaveStep(err)
		}
		return stepNext
	}
	c.shard.out = out
	if err := c.refuse(typ, out); err != nil {
		return c.leaveStep(err)
	}
	return stepNext
}

// refusalText is a refusal's message, DETAIL and HINT.
func refusalText(ss *shardSession, d shard.Decision) (msg, detail, hint string) {
	msg = "pgturnstile: statement cannot be routed to one shard"
	if d.Reason == shard.ReasonShape && len(d.Table) == 0 && ss.routerOf == nil {
		return "pgturnstile: cluster \"" + ss.cluster + "\" is no longer in the shard file", "", "Reconnect."
	}
	var b strings.Builder
	if len(d.Table) > 0 {
		b.WriteString("table ")
		b.Write(d.Table)
		if d.Column != "" {
			b.WriteString(" (key " + d.Column + ")")
		}
		b.WriteString(": ")
	}
	b.WriteString(d.Reason.Text())
	hint = "Give the key in the statement (" + "WHERE key = value), or name it: /* pgturnstile: shard_key=VALUE */ before the statement, or SET LOCAL pgturnstile.shard_key = 'VALUE' in a transaction."
	return msg, b.String(), hint
}

// crossShard is what a linked transaction's server gets in place of a
// simple Query the router sends to another shard, or refuses: an error
// Postgres raises itself, so the transaction ends failed on both sides
// and the client's ROLLBACK works as usual.
func crossShard(ss *shardSession, d shard.Decision, pinned string) []byte {
	msg, detail, hint := refusalText(ss, d)
	if d.Source != shard.SourceRefused {
		msg = "pgturnstile: statement for shard " + d.Database + " in a transaction on shard " + pinned
		detail = "A transaction runs on the shard of its first statement."
		hint = "Run it in a transaction of its own."
	}
	q := "DO $pgturnstile$BEGIN RAISE EXCEPTION USING ERRCODE = '0A000', MESSAGE = " + sqlString(msg) +
		", DETAIL = " + sqlString(detail) + ", HINT = " + sqlString(hint) + "; END$pgturnstile$"
	return wire.AppendQuery(nil, q)
}

// sqlString quotes s as a standard SQL string literal.
func sqlString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// heldLinkedLocked runs on a server just linked while the client's BEGIN
// is held. For the transaction's first statement the BEGIN is sent ahead
// of it (replayHeldLocked). What says nothing of the transaction's shard
// (a Parse alone, a Describe) runs outside it, and the pump shows its
// ReadyForQuery as 'T', the status the client is in. c.mu held.
func (l *link) heldLinkedLocked(s *server, sd shardDecision) {
	if sd.active && !sd.undecided {
		l.replayHeldLocked(s)
		return
	}
	l.pump.asHeld = true
}

// replayHeldLocked sends the held BEGIN ahead of the transaction's first
// statement on the server just linked for it; the pump swallows its
// replies (pumpSwallow), which the client had from the pooler. c.mu held.
func (l *link) replayHeldLocked(s *server) {
	c := l.c
	ss := c.shard
	now := c.svc.clock.Now()
	c.mu.queryStart, l.mu.xactStart = now, now
	l.mu.ls.fromClient(wire.MsgQuery)
	l.pump.swallow++
	s.w.Write(ss.held)
	ss.held = nil
}

// heldToShardLocked holds a statement of a transaction already on server
// s to s's shard. A simple Query for another shard, or one the router
// refuses, is replaced by an error Postgres raises (raise): the
// transaction fails on both sides. A Bind for another shard ends the
// client (fatal), whose server the drain rolls back: the extended
// protocol has no reply to put in its place. c.mu held.
func (l *link) heldToShardLocked(typ byte, s *server, d shard.Decision) (raise []byte, fatal bool) {
	ss := l.c.shard
	if ss.routerOf != nil && ss.routerOf.Shadow {
		return nil, false
	}
	pinned := s.pool.key.db
	wrong := d.Source == shard.SourceRefused || d.Source == shard.SourceScatter ||
		d.Source != shard.SourceDefault && d.Database != "" && d.Database != pinned
	if !wrong {
		return nil, false
	}
	switch typ {
	case wire.MsgQuery:
		return crossShard(ss, d, pinned), false
	case wire.MsgBind:
		return nil, true
	}
	return nil, false
}

// crossShardFatal is what a client hears when its Bind belongs to another
// shard than its transaction's.
func crossShardFatal() *Error {
	return &Error{Severity: "FATAL", SQLState: "0A000", Message: "pgturnstile: statement for another shard in a transaction"}
}

// relayRaise writes the error statement that replaces the client's Query
// (consumed) on s.
func (l *link) relayRaise(r routed, s *server) error {
	c := l.c
	if c.tracking {
		c.mu.Lock()
		s.unnamedOwner = 0
		l.mu.ops.push(op{kind: opSync, msg: wire.MsgQuery})
		c.mu.Unlock()
	}
	if err := c.r.Skip(); err != nil {
		return err
	}
	return s.w.Write(r.raise)
}

// pumpSwallow drops a server's replies to a held BEGIN up to its
// ReadyForQuery, which only moves the link's protocol position. A BEGIN
// that fails (the server in a state nothing should leave it in) loses the
// server: the client's statement must not run outside its transaction.
func (l *link) pumpSwallow(s *server, typ byte) replyAct {
	c := l.c
	switch typ {
	case wire.MsgErrorResponse:
		l.serverLost(s, errHeldBeginFailed)
		return replyLinkOver
	case wire.MsgReadyForQuery:
		msg, err := s.r.Message()
		var status byte
		if err == nil {
			status, err = wire.ReadyForQueryStatus(msg[5:])
		}
		if err != nil {
			l.serverLost(s, err)
			return replyLinkOver
		}
		l.pump.swallow--
		l.pump.replies = 0
		c.mu.Lock()
		l.mu.ls.readyForQuery(status)
		c.mu.Unlock()
		return replyDone
	}
	if err := s.r.Skip(); err != nil {
		l.serverLost(s, err)
		return replyLinkOver
	}
	return replyDone
}

var errHeldBeginFailed = errors.New("the server refused a BEGIN the pooler had answered")

// databaseNames are the [databases] entries a shard file may route to
// ("*" is none: a shard is a database of its own).
func databaseNames(cfg *config.Config) []string {
	names := make([]string, 0, len(cfg.Databases))
	for name := range cfg.Databases {
		if name != "*" {
			names = append(names, name)
		}
	}
	return names
}

// setStartupPin takes -c pgturnstile.shard_key, .colo or .shard from the
// startup options into p; false for the other pgturnstile.* keys (the
// admission policy's).
func setStartupPin(p *shard.Pin, key, value string) bool {
	switch key {
	case "shard_key":
		p.Key = []byte(value)
	case "colo":
		p.Colo = value
	case "shard":
		p.Shard = value
	default:
		return false
	}
	return true
}

// heldReady is the ReadyForQuery of a link that ran outside the client's
// held transaction.
var heldReady = wire.AppendReadyForQuery(nil, wire.TxInBlock)

// Shards is SHOW SHARDS: every range of every colocation of the map in
// force.
func (v consoleView) Shards() []admin.ShardRow {
	g := v.s.gen.Load()
	if g.shards == nil {
		return nil
	}
	var rows []admin.ShardRow
	for _, cl := range g.shards.Clusters() {
		for _, co := range cl.Colos() {
			for _, r := range co.Ranges() {
				rows = append(rows, admin.ShardRow{Cluster: cl.Name, Colo: co.Name, KeyType: co.KeyType.String(),
					Range: fmt.Sprintf("%d-%d", r.First, r.Last), Database: r.Database, Generation: g.seq})
			}
		}
	}
	return rows
}

// Routes is SHOW ROUTES: the decisions counted so far.
func (v consoleView) Routes() []admin.RouteRow {
	counts := v.s.routes.Snapshot()
	rows := make([]admin.RouteRow, 0, len(counts))
	for _, n := range counts {
		row := admin.RouteRow{Cluster: n.Cluster, Colo: n.Colo, Source: n.Source.String(), Count: n.N}
		if n.Source == shard.SourceRefused {
			row.Reason = n.Reason.Text()
		}
		rows = append(rows, row)
	}
	return rows
}

// poisonBind names a statement no session has: the server fails it with
// 26000, which aborts the transaction it is in (an implicit one up to the
// Sync too) before the drain's Sync could commit it.
var poisonBind = func() []byte {
	body := append([]byte{0}, "pgturnstile: statement for another shard"...)
	body = append(body, 0, 0, 0, 0, 0, 0, 0)
	msg := append([]byte{wire.MsgBind, 0, 0, 0, 0}, body...)
	binary.BigEndian.PutUint32(msg[1:], uint32(len(msg)-1))
	return msg
}()

// poisonTransaction makes the transaction on s fail before a client that
// reached for another shard is closed: nothing of it may commit.
func poisonTransaction(s *server) {
	s.w.Write(poisonBind)
	s.w.Flush()
}

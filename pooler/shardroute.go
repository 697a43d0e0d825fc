package pooler

import (
	"bytes"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/shard/pause"
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
	// held is a BEGIN the pooler answered while no server was linked,
	// and the SAVEPOINT, RELEASE, ROLLBACK TO and SET LOCAL after it: their
	// Query messages (heldN of them), sent ahead of the transaction's
	// first statement.
	held  []byte
	heldN int
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
	stmts stmtRoutes
	// last is the database of the client's last transaction, where a
	// Parse or Describe that decides nothing goes.
	last string
	out  []byte
	// mayTarget: the client may name a shard (admin_users, target_users),
	// as of the map routerOf is from.
	mayTarget bool
	// sessionPinned: in session mode, the session has run a statement
	// that decided a shard, and keeps that server to its end. Before, its
	// transactions are routed and released as in transaction mode (a
	// driver's Parse/Describe before its first Bind, statements on no colo
	// table). Atomic: the pump reads it (releaseMode).
	sessionPinned atomic.Bool
	// bind is the current Bind's body as stmtRoute.decide hands it to
	// the router.
	bind bindParams
	// routerGen is the generation routerNow last looked the cluster up
	// in, and routerGenR what it found (nil: the cluster is gone).
	routerGen  *generation
	routerGenR *shard.Router
	// esc is the session's standard_conforming_strings read as the
	// router needs it (off: '…' takes backslash escapes), from the
	// parameter map escOf (client parameter maps are never changed in
	// place: a change makes a new one).
	esc   bool
	escOf map[string]string
	// lastPool is the pool of database lastPoolDB, the last one pool
	// returned: most transactions of a client go where its last went.
	lastPool   *serverPool
	lastPoolDB string
	// memo is the decision the batch walk (batchDecisionOnce) made for a
	// Bind still ahead in the read buffer, for that Bind when it is read:
	// one decision per Bind. Cleared at every message shardDecide reads.
	memo bindMemo
	// tally counts the decisions into Service.routes; held here, beside
	// memo, which shardDecide has just read, rather than apart.
	tally shard.Tally
	// rerouted: route decides the current message again after a wait for
	// a paused range; it was counted the first time.
	rerouted bool
}

// bindMemo is a Bind's decision, made before the Bind was the current
// message: at, the first byte of its body in the read buffer, and n, its
// length, tell it when it is (the messages between it and the walk are
// already buffered, so it is not moved).
type bindMemo struct {
	at *byte
	n  int
	d  shard.Decision
}

// of returns the memo's decision for the Bind body, if it is the Bind.
func (m *bindMemo) of(body []byte) (shard.Decision, bool) {
	if m.at == nil || len(body) != m.n || &body[0] != m.at {
		return shard.Decision{}, false
	}
	return m.d, true
}

// stmtRoute is a Parse's routing (st: final, or decided by its Binds)
// under the map of cluster of and the session's pins then; a Bind after a
// RELOAD brought another map, or under other pins, prepares the text
// again. st is shared with the cluster's other clients when made with no
// pin (shard.Statements), and never changed.
type stmtRoute struct {
	st   *shard.Statement
	of   *shard.Cluster
	pins uint64
}

// text is the statement's text ("" for none).
func (sr stmtRoute) text() string {
	if sr.st == nil {
		return ""
	}
	return sr.st.Text
}

// tx is the statement's transaction control (TxNone for none).
func (sr stmtRoute) tx() shard.TxControl {
	if sr.st == nil {
		return shard.TxNone
	}
	return sr.st.Tx
}

// stmtRoutes is a client's stmtRoute by statement name. The unnamed
// statement, which most drivers parse again at every transaction, is kept
// inline: its routing is read from the session's own memory, not from a
// map's.
type stmtRoutes struct {
	unnamed stmtRoute // st nil: none
	named   map[string]stmtRoute
}

func (s *stmtRoutes) get(name []byte) (stmtRoute, bool) {
	if len(name) == 0 {
		return s.unnamed, s.unnamed.st != nil
	}
	sr, ok := s.named[string(name)]
	return sr, ok
}

func (s *stmtRoutes) set(name []byte, sr stmtRoute) {
	if len(name) == 0 {
		s.unnamed = sr
		return
	}
	if s.named == nil {
		s.named = map[string]stmtRoute{}
	}
	s.named[string(name)] = sr
}

func (s *stmtRoutes) del(name []byte) {
	if len(name) == 0 {
		s.unnamed = stmtRoute{}
		return
	}
	delete(s.named, string(name))
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
	var pin shard.Pin
	if c.startPin != nil {
		pin = *c.startPin
	}
	c.shard = &shardSession{cluster: cl.Name, pin: pin, pools: map[string]*serverPool{},
		tally: shard.MakeTally(&c.svc.routes)}
	return db, true
}

// viewsStartupCheck refuses a login to a cluster served through views
// (shard file views = true) that sets search_path: it would be set on
// every shard's server and find the tables behind the views.
func (c *client) viewsStartupCheck(params map[string]string) error {
	if c.shard == nil {
		return nil
	}
	g := c.svc.gen.Load()
	if cl := g.shards.Cluster(c.shard.cluster); cl == nil || !cl.Views {
		return nil
	}
	for k := range params {
		if strings.EqualFold(k, "search_path") {
			return pgerror.New(pgerror.ViewsSearchPath, c.shard.cluster)
		}
	}
	return nil
}

// routerNow returns the router of the client's cluster in the map in
// force, nil when a RELOAD removed the cluster.
func (ss *shardSession) routerNow(c *client, g *generation) *shard.Router {
	if g == ss.routerGen {
		return ss.routerGenR
	}
	ss.routerGen, ss.routerGenR = g, ss.routerIn(c, g)
	return ss.routerGenR
}

func (ss *shardSession) routerIn(c *client, g *generation) *shard.Router {
	var cl *shard.Cluster
	if g.shards != nil {
		cl = g.shards.Cluster(ss.cluster)
	}
	if cl == nil {
		return nil
	}
	if ss.routerOf != cl {
		ss.router, ss.routerOf = shard.NewRouter(cl), cl
		ss.mayTarget = c.mayTarget(cl)
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

// shardDecides reports the messages shardDecide reads: a Query, Parse or
// Bind (which may decide a shard, or be answered by the pooler) and a
// Close (which forgets a statement's routing). The rest of a batch
// (Describe, Execute, Sync, Flush) goes where its transaction's first
// message took it, or to the pooler's own answers, with no decision: they
// skip shardDecide and its hold of c.mu, three of the five messages of
// each transaction of an extended-protocol driver.
func shardDecides(typ byte) bool {
	switch typ {
	case wire.MsgQuery, wire.MsgParse, wire.MsgBind, wire.MsgClose:
		return true
	}
	return false
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
		// The pump is giving the last transaction's server back: this
		// message starts the next transaction (a BEGIN sent the moment
		// the COMMIT's ReadyForQuery arrived must be held).
		l.mu.releaseDone.Wait()
	}
	skipping := l.mu.skipToSync
	linked := l.mu.srv != nil
	idle := !linked || l.mu.ls.Idle() && l.mu.ls.TxStatus() == wire.TxIdle
	if !sameMap(ss.escOf, c.params) {
		// The session's standard_conforming_strings, as the pump last
		// heard it.
		ss.esc, ss.escOf = shard.EscapeStrings(c.params["standard_conforming_strings"]), c.params
	}
	c.mu.Unlock()
	memo := ss.memo
	ss.memo = bindMemo{}
	if skipping {
		return shardDecision{}, stepOn // dropped up to the Sync anyway
	}
	if idle && ss.held == nil && !ss.local.Empty() {
		ss.local = shard.Pin{} // SET LOCAL's transaction is over
		ss.pins++
	}
	r := ss.routerNow(c, c.svc.gen.Load())
	switch typ {
	case wire.MsgQuery:
		text, err := l.shardText(n)
		if err != nil {
			return shardDecision{}, c.leaveStep(err)
		}
		if r == nil {
			return shardDecision{active: true, d: goneCluster}, stepOn
		}
		if step, answered := l.answerShardQuery(text, linked); answered {
			return shardDecision{}, step
		}
		r.SetEscapeStrings(ss.esc) // with off, '…' takes backslash escapes, for the router as for Postgres
		return shardDecision{active: true, d: r.Route(text, ss.pinNow(), ss.mayTarget)}, stepOn
	case wire.MsgParse:
		body, err := l.shardText(n)
		if err != nil {
			return shardDecision{}, c.leaveStep(err)
		}
		if r == nil {
			return shardDecision{active: true, d: goneCluster}, stepOn
		}
		name, text, _, ok := wire.DecodeParse(body)
		if !ok {
			return shardDecision{}, stepOn // malformed: the pooler's own checks answer it
		}
		sr, same := ss.stmts.get(name)
		if !same || sr.st.Text != string(text) || sr.of != ss.routerOf || sr.pins != ss.pins {
			// A statement the client has not prepared under this name,
			// map and pins: the unnamed one of a driver that parses
			// each time is the same text again, routed once.
			sr = ss.prepare(r, text)
			ss.stmts.set(name, sr)
		}
		if linked {
			return shardDecision{active: true, d: sr.st.Decision}, stepOn
		}
		return l.batchStart(typ, body, &sr)
	case wire.MsgBind:
		body, err := l.shardText(n)
		if err != nil {
			return shardDecision{}, c.leaveStep(err)
		}
		if r == nil {
			return shardDecision{active: true, d: goneCluster}, stepOn
		}
		if linked {
			if d, ok := memo.of(body); ok {
				return shardDecision{active: true, d: d}, stepOn
			}
			return shardDecision{active: true, d: l.bindDecision(body)}, stepOn
		}
		return l.batchStart(typ, body, nil)
	case wire.MsgClose:
		if body, err := c.r.Peek(n); err == nil && len(body) > 1 && body[0] == 'S' {
			if i := bytes.IndexByte(body[1:], 0); i >= 0 {
				ss.stmts.del(body[1 : 1+i])
			}
		}
	}
	return shardDecision{}, stepOn
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
	_, stmt, _, ok := wire.DecodeBindHead(body)
	if !ok {
		return shard.Decision{}
	}
	sr, ok := l.c.shard.stmtRouteOf(l.c, stmt)
	if !ok {
		// Prepared some other way (SQL PREPARE): nothing says where its
		// rows are.
		return shard.Decision{Source: shard.SourceRefused, Reason: shard.ReasonShape}
	}
	return sr.decide(l.c.shard, body)
}

// stmtRouteOf is the routing of the client's statement stmt, prepared
// again under the map and pins in force when it was under others.
func (ss *shardSession) stmtRouteOf(c *client, stmt []byte) (stmtRoute, bool) {
	sr, known := ss.stmts.get(stmt)
	if !known {
		// Not seen by the router (the client came over in an online
		// restart): the text the mapping keeps for it says where its
		// rows are.
		text, ok := c.stmtText(string(stmt))
		if !ok {
			return stmtRoute{}, false
		}
		sr = stmtRoute{st: &shard.Statement{Text: text}}
	}
	if sr.of != ss.routerOf || sr.pins != ss.pins {
		// Prepared under an earlier map (its ranges may have moved) or
		// other pins.
		sr = ss.prepare(ss.router, []byte(sr.st.Text))
		ss.stmts.set(stmt, sr)
	}
	return sr, true
}

// prepare is a Parse's routing under the map and pins in force: the
// cluster's shared one when the session has no pin.
func (ss *shardSession) prepare(r *shard.Router, text []byte) stmtRoute {
	sr := stmtRoute{of: r.Cluster(), pins: ss.pins}
	r.SetEscapeStrings(ss.esc)
	if pin := ss.pinNow(); pin.Empty() {
		sr.st = r.Statement(text, ss.mayTarget)
	} else {
		sr.st = r.PrepareStatement(text, pin, ss.mayTarget)
	}
	return sr
}

// decide is the decision for one Bind of the statement. The body is
// handed to Bind through the session's bindParams: a []byte converted to
// the BindParams interface would be copied to the heap at every Bind.
func (sr stmtRoute) decide(ss *shardSession, body []byte) shard.Decision {
	if sr.st.Prepared == nil {
		return sr.st.Decision
	}
	ss.bind.body = body
	d, err := sr.st.Prepared.Bind(&ss.bind)
	ss.bind.body = nil // the read buffer's: not kept past the message
	if err != nil {
		return shard.Decision{Source: shard.SourceRefused, Reason: shard.ReasonShape}
	}
	return d
}

// bindParams is a Bind body as shard.Prepared.Bind reads it.
type bindParams struct{ body []byte }

func (b *bindParams) Param(i int) (value []byte, binary, null, ok bool) {
	return wire.BindParam(b.body, i)
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
	db := d.Database
	switch {
	case cl != nil && cl.Shadow:
		// Decided and counted (refusals too), run on the default.
		db = cl.DefaultDatabase
	case d.Source == shard.SourceScatter:
		return l.shardScatterUnpaused(typ, d)
	case d.Source == shard.SourceRefused:
		return l.refuseShard(typ, d)
	case db == "":
		return l.refuseShard(typ, shard.Decision{Source: shard.SourceRefused, Reason: shard.ReasonShape})
	}
	p, err := ss.pool(c, g, db)
	if err != nil {
		return l.refuseShard(typ, shard.Decision{Source: shard.SourceRefused, Reason: shard.ReasonShape})
	}
	span := pause.Span{}
	if cl == nil || !cl.Shadow {
		span = pause.SpanOf(d)
	}
	c.mu.Lock()
	l.mu.route = p
	l.mu.shardTx = span // before the pause check: see shardpause.go
	c.mu.Unlock()
	if step, held := l.holdIfPaused(typ, span); held {
		return step
	}
	ss.last = d.Database
	if c.mode == config.PoolModeSession && (d.Source != shard.SourceDefault || !c.tracking) {
		// The session's first statement that decides a shard: the
		// session stays on it (a held Parse is prepared there again by
		// the mapping, ahead of the Bind).
		ss.sessionPinned.Store(true)
	}
	return stepOn
}

// shardScatterUnpaused runs a scatter unless a range of the cluster is
// paused: then it waits as a keyed transaction does (every range is its
// span), and PAUSE SHARD waits for a scatter running.
func (l *link) shardScatterUnpaused(typ byte, d shard.Decision) loopStep {
	c := l.c
	span := pause.SpanAll()
	c.mu.Lock()
	l.mu.shardTx = span
	c.mu.Unlock()
	if step, held := l.holdIfPaused(typ, span); held {
		return step
	}
	step := l.shardScatter(typ, d)
	c.mu.Lock()
	l.forgetShardTxLocked()
	c.mu.Unlock()
	return step
}

// pool returns the pool of database db for the client, made and pinned
// at its first use.
func (ss *shardSession) pool(c *client, g *generation, db string) (*serverPool, error) {
	if ss.lastPool != nil && db == ss.lastPoolDB {
		return ss.lastPool, nil
	}
	p, err := ss.poolOf(c, g, db)
	if err == nil {
		ss.lastPool, ss.lastPoolDB = p, db
	}
	return p, err
}

func (ss *shardSession) poolOf(c *client, g *generation, db string) (*serverPool, error) {
	if p, ok := ss.pools[db]; ok {
		return p, nil
	}
	if c.pool.key.db == db {
		return c.pool, nil
	}
	entry, ok := g.cfg.LookupDatabase(db)
	if !ok {
		return nil, pgerror.New(pgerror.NoSuchDatabase, db)
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
	c.shard.lastPool, c.shard.lastPoolDB = nil, ""
}

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

// stmtText is the text of the client's prepared statement name as the
// mapping knows it (max_prepared_statements).
func (c *client) stmtText(name string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs := c.mu.stmts[name]
	if cs == nil {
		return "", false
	}
	return cs.Def.Query, true
}

// movable reports whether a client can be handed to another process in
// an online restart: a sharded cluster's client only when it holds
// nothing the new process could not rebuild (a held BEGIN, pins).
func (ss *shardSession) movable() bool {
	return ss == nil || ss.held == nil && ss.pin.Empty() && ss.local.Empty() && !ss.sessionPinned.Load()
}

// mapsStatements reports whether the prepared-statement mapping is on for
// the client: with max_prepared_statements, in transaction and statement
// mode, and in session mode for a sharded cluster's client, whose session
// runs on more than one server until it pins to a shard.
func (c *client) mapsStatements(st *config.Settings) bool {
	return (c.mode != config.PoolModeSession || c.shard != nil) && st.MaxPreparedStatements > 0
}

// releaseMode is the pool mode whose release rule the pump applies: a
// sharded cluster's session-mode client is released as in transaction
// mode until its session pins to a shard (shardLink), when the mapping
// can prepare its statements again on the shard; without the mapping
// (max_prepared_statements = 0) its first statement pins it. c.mu held.
func (c *client) releaseMode() config.PoolMode {
	if c.mode == config.PoolModeSession && c.shard != nil && c.tracking && !c.shard.sessionPinned.Load() {
		return config.PoolModeTransaction
	}
	return c.mode
}

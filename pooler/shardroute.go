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
	"github.com/pgturnstile/pgturnstile/shard/session"
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
// transactions: the routing state (package session: pins, the held
// BEGIN, its statements' routing) and the pooler's part of it. Only
// serve's goroutine touches it.
type shardSession struct {
	session.Session
	// pools are the shard pools the client has used, pinned (poolfree.go)
	// until it leaves.
	pools map[string]*serverPool
	// secret and clientKey are what the client proved at login, for the
	// server logins of shard pools without a user of their own, as the
	// home pool has them (authenticateForPool).
	secret    *auth.Secret
	clientKey []byte
	out       []byte
	// sessionPinned: in session mode, the session has run a statement
	// that decided a shard, and keeps that server to its end. Before, its
	// transactions are routed and released as in transaction mode (a
	// driver's Parse/Describe before its first Bind, statements on no colo
	// table). Atomic: the pump reads it (releaseMode).
	sessionPinned atomic.Bool
	// routerGen is the generation routerNow last looked the cluster up
	// in, and routerGenR what it found (nil: the cluster is gone).
	routerGen  *generation
	routerGenR *shard.Router
	// escOf is the parameter map the session's Esc was read from (client
	// parameter maps are never changed in place: a change makes a new
	// one).
	escOf map[string]string
	// lastPool is the pool of database lastPoolDB, the last one pool
	// returned: most transactions of a client go where its last went.
	lastPool   *serverPool
	lastPoolDB string
	// tally counts the decisions into Service.routes.
	tally shard.Tally
	// rerouted: route decides the current message again after a wait for
	// a paused range; it was counted the first time.
	rerouted bool
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
	c.shard = &shardSession{Session: session.New(cl.Name, pin), pools: map[string]*serverPool{},
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
	if cl := g.shards.Cluster(c.shard.Cluster); cl == nil || !cl.Views {
		return nil
	}
	for k := range params {
		if strings.EqualFold(k, "search_path") {
			return pgerror.New(pgerror.ViewsSearchPath, c.shard.Cluster)
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
		cl = g.shards.Cluster(ss.Cluster)
	}
	return ss.Use(cl, c.mayTarget)
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
		ss.Esc, ss.escOf = shard.EscapeStrings(c.params["standard_conforming_strings"]), c.params
	}
	c.mu.Unlock()
	memo := ss.Memo
	ss.Memo = session.BindMemo{}
	if skipping {
		return shardDecision{}, stepOn // dropped up to the Sync anyway
	}
	ss.EndLocal(idle) // SET LOCAL's transaction may be over
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
		return shardDecision{active: true, d: ss.Route(r, text)}, stepOn
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
		sr := ss.Parse(r, name, text)
		if linked {
			return shardDecision{active: true, d: sr.St.Decision}, stepOn
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
			if d, ok := memo.Of(body); ok {
				return shardDecision{active: true, d: d}, stepOn
			}
			return shardDecision{active: true, d: ss.Bind(body, c.stmtText)}, stepOn
		}
		return l.batchStart(typ, body, nil)
	case wire.MsgClose:
		if body, err := c.r.Peek(n); err == nil && len(body) > 1 && body[0] == 'S' {
			if i := bytes.IndexByte(body[1:], 0); i >= 0 {
				ss.Stmts.Del(body[1 : 1+i])
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

// shardLink prepares the link of a message that needs a server for the
// decision d, with no server linked: the pool of d's database becomes the
// transaction's (link.mu.route). stepNext when the message was refused
// (answered, nothing sent to a server).
func (l *link) shardLink(typ byte, d shard.Decision) loopStep {
	c := l.c
	ss := c.shard
	g := c.svc.gen.Load()
	cl := ss.Map()
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
	ss.Last = d.Database
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
	return ss == nil || ss.Movable() && !ss.sessionPinned.Load()
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

package pooler

import (
	"bytes"
	"time"

	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/shard/session"
	"github.com/pgturnstile/pgturnstile/wire"
)

// Scatter (shard=all, on_missing_key = "scatter"): a read outside a
// transaction, a simple Query or one statement's extended batch (Parse or
// Bind, Execute, Sync), runs on every database at once, and the client
// gets one answer: the first database's RowDescription (each other's must
// describe the same columns), every database's rows, SELECT (or COPY)
// with their sum. The first error wins; the other databases' queries are
// cancelled. A statement that is not such a read, sent with shard=all,
// runs on each database in turn, and each failure is reported. The
// answers are composed by package session (Gather, Each); here the
// servers are taken, written and read. Scatters hold a server of
// each database at once, so at most maxScatters run at a time, pooler-wide;
// they skip the admission gate, and a client's cancel request does not
// reach them (their servers are not linked).

// maxScatters caps the scatters running at once.
const maxScatters = 8

// scatterJob is one database's part of a scatter.
type scatterJob struct {
	db   string
	pool *serverPool
	s    *server
	// done: its ReadyForQuery was read (the server can go back).
	done bool
}

// shardScatter serves a scatter decision: a simple Query outside a
// transaction, a read on the colocation's databases (or every database
// of the cluster for shard=all), or anything on each database in turn
// for shard=all; else refused.
func (l *link) shardScatter(typ byte, d shard.Decision) loopStep {
	c := l.c
	ss := c.shard
	explicit := d.Reason == shard.ReasonNone // shard=all, not on_missing_key
	refusal := shard.Decision{Source: shard.SourceRefused, Reason: shard.ReasonScatterShape, Table: d.Table, Column: d.Column}
	if typ != wire.MsgQuery && typ != wire.MsgParse && typ != wire.MsgBind || ss.Held != nil {
		refusal.Reason = shard.ReasonScatter
		return l.refuseShard(typ, refusal)
	}
	if typ != wire.MsgQuery {
		return l.scatterBatch(typ, explicit, refusal)
	}
	text, err := l.shardText(c.r.BodyLen())
	if err != nil {
		return c.leaveStep(err)
	}
	kind := shard.Scatterable(text)
	dbs := ss.Map().Databases()
	if kind == shard.ScatterNone && (!explicit || shard.ReturnsRows(text)) {
		// Rows that are not the union of each shard's, or a read that
		// would answer with one shard's.
		return l.refuseShard(typ, refusal)
	}
	if !explicit {
		if t, ok := ss.Map().Table(d.Table); ok {
			dbs = t.Colo.Databases()
		}
	}
	return l.scatter(kind, dbs)
}

// scatter answers a cluster client's Query (not yet consumed) by running
// it on dbs.
func (l *link) scatter(kind shard.ScatterKind, dbs []string) loopStep {
	c := l.c
	n := c.r.BodyLen()
	text, err := l.shardText(n)
	if err != nil {
		return c.leaveStep(err)
	}
	q := wire.AppendQuery(nil, string(text))
	if err := c.r.Skip(); err != nil {
		return c.leaveStep(err)
	}
	step, _ := l.scatterRun(q, kind, dbs, false)
	return step
}

// scatterRun runs q (a Query, or an extended batch up to its Sync, the
// client's consumed) on dbs; replayed: q starts with a Parse the client
// did not send, whose ParseComplete it does not get. parsed: the client
// got a ParseComplete for the batch's Parse (its statement exists for it,
// as after a Parse Postgres ran, whatever its execution did).
func (l *link) scatterRun(q []byte, kind shard.ScatterKind, dbs []string, replayed bool) (step loopStep, parsed bool) {
	c := l.c
	ss := c.shard
	select {
	case c.svc.scatters <- struct{}{}:
		defer func() { <-c.svc.scatters }()
	default:
		return l.answerQueryError("53300", "pgturnstile: too many statements running on every shard at once", "", "Retry later."), false
	}
	g := c.svc.gen.Load()
	jobs := make([]*scatterJob, 0, len(dbs))
	defer func() {
		for _, j := range jobs {
			j.finish()
		}
	}()
	for _, db := range dbs {
		p, err := ss.pool(c, g, db)
		if err != nil {
			return l.answerQueryError("08006", "pgturnstile: shard "+db+" unavailable: "+err.Error(), "", ""), false
		}
		s, err := p.acquire(nil, nil)
		if err != nil {
			return l.answerQueryError("08006", "pgturnstile: shard "+db+" unavailable: "+err.Error(), "", ""), false
		}
		j := &scatterJob{db: db, pool: p, s: s}
		jobs = append(jobs, j)
		s.unnamedOwner = 0 // a scatter's Parse replaces the unnamed statement
		if err := l.syncParamsUnlessMatch(s); err != nil {
			j.lost("var change failed")
			return l.answerQueryError("08006", "pgturnstile: shard "+db+" failed: "+err.Error(), "", ""), false
		}
	}
	if kind == shard.ScatterNone {
		return l.scatterEach(jobs, q, replayed)
	}
	for _, j := range jobs {
		j.s.w.Write(q)
		if err := j.s.w.Flush(); err != nil {
			j.lost("scatter write failed")
		}
	}
	return l.scatterRead(jobs, kind, replayed)
}

// scatterBatch serves a scatter decided at a Parse or a Bind: the batch,
// whole in the buffer, must be one statement's Parse or Bind, its Bind to
// the unnamed portal, Execute (all rows) and Sync, with Describes, as
// pgx's modes, psql's \bind, psycopg and pgjdbc send a query. It runs on
// every database as the unnamed statement's, and the client gets one
// answer, as for a Query. A batch that only parses and describes runs
// where an undecided one does; a Bind that follows it (pgx's
// describe-exec and default modes) has the statement's Parse, as the
// mapping keeps it, sent ahead of it on each database, unnamed. So a named
// statement needs no name on any shard's server: each Bind of it is a
// scatter of its own, and the mapping holds its name for the client. DDL
// or a write that shard=all names runs on each database in turn, as a
// Query's does (scatterEach).
func (l *link) scatterBatch(typ byte, explicit bool, refusal shard.Decision) loopStep {
	c := l.c
	ss := c.shard
	named := refusal
	named.Reason = shard.ReasonScatterNamed
	var msgs []session.Msg
	for {
		body, err := c.r.Peek(c.r.BodyLen())
		if err != nil {
			return c.leaveStep(err)
		}
		it := l.batch(typ, body)
		msgs = msgs[:0]
		flushed := false
		for m, ok := it.Next(); ok; m, ok = it.Next() {
			msgs = append(msgs, m)
			flushed = flushed || m.Type == wire.MsgFlush
		}
		if it.Synced {
			break
		}
		// Not whole yet: the client, which has sent no Sync, waits for
		// no reply (as batchDecision).
		if flushed || c.r.FillAhead() != nil {
			return l.refuseShard(typ, named)
		}
	}
	dbs := ss.Map().Databases()
	if !explicit {
		if t, ok := ss.Map().Table(refusal.Table); ok {
			dbs = t.Colo.Databases()
		}
	}
	// stmt: the statement the batch parses or binds ("": the unnamed one).
	var stmt []byte
	parse, rest := msgs[0].Body, msgs[1:]
	replayed := typ == wire.MsgBind
	if replayed {
		_, stmt, _, _ = wire.DecodeBindHead(msgs[0].Body) // it decided the scatter: whole
		parse, rest = c.scatterParse(stmt), msgs
	} else if name, _, _, ok := wire.DecodeParse(parse); ok {
		stmt = name
		if session.DescribesOnly(rest, stmt) && len(dbs) > 0 {
			// Parse and Describe: nothing runs yet (the client learns the
			// statement's columns, on one of the databases the scatter
			// will read); its Bind scatters.
			return l.shardLink(typ, shard.Decision{Source: shard.SourceDefault, Database: dbs[0]})
		}
	}
	name, text, types, ok := wire.DecodeParse(parse)
	sr, _ := ss.Stmts.Get(stmt)
	if !ok || replayed && (len(name) > 0 || string(text) != sr.Text()) || len(stmt) > 0 && !c.tracking {
		// No Parse to send ahead (max_prepared_statements = 0), or not
		// the one the router decided.
		return l.refuseShard(typ, named)
	}
	if !replayed && len(stmt) > 0 && c.stmtHeld(string(stmt)) {
		// A name the client holds: the mapping's answer (PgBouncer's
		// error, in order; answerParse).
		c.mu.Lock()
		l.refuseInBatchLocked(errStmtExists)
		c.mu.Unlock()
		c.logStmtRefusal("prepared statement '"+string(stmt)+"' was already prepared", errStmtExists)
		if err := c.r.Skip(); err != nil {
			return c.leaveStep(err)
		}
		return stepNext
	}
	session.Unname(rest, stmt)
	if !session.UnnamedScatter(rest) {
		return l.refuseShard(typ, named)
	}
	if !replayed && len(stmt) > 0 {
		// The client's named Parse runs unnamed on every database; its
		// name is held once it has (the client's buffer is read on by
		// then: copies).
		msgs[0].Body = wire.AppendParse(nil, "", string(text), types)[5:]
		stmt, text, types = bytes.Clone(stmt), bytes.Clone(text), bytes.Clone(types)
	}
	kind := shard.Scatterable(text)
	if kind == shard.ScatterNone && (!explicit || shard.ReturnsRows(text)) {
		// As for a Query: DDL and writes that shard=all names run on each
		// database in turn; any other text is refused.
		return l.refuseShard(typ, refusal)
	}
	var q []byte
	if replayed {
		q = wire.AppendHeader(q, wire.MsgParse, len(parse))
		q = append(q, parse...)
	}
	for _, m := range msgs {
		q = wire.AppendHeader(q, m.Type, len(m.Body))
		q = append(q, m.Body...)
	}
	for i := range msgs { // whole in the buffer: no read waits
		if i > 0 {
			if _, _, err := c.r.Next(); err != nil {
				return c.leaveStep(err)
			}
		}
		if err := c.r.Skip(); err != nil {
			return c.leaveStep(err)
		}
	}
	if c.tracking && !replayed && len(stmt) == 0 {
		// The client's unnamed statement is this one now, on no server
		// the mapping knows of: a later Bind of it alone is not replayed.
		c.mu.Lock()
		c.forgetUnnamedLocked()
		c.mu.Unlock()
	}
	step, parsed := l.scatterRun(q, kind, dbs, replayed)
	if parsed && !replayed && len(stmt) > 0 {
		// The client got its ParseComplete: it has the name now, which the
		// mapping holds (on no server yet), for the next Bind.
		c.holdStmtName(string(stmt), string(text), types)
	}
	return step
}

// scatterParse is the body of the Parse a scatter sends ahead of a Bind of
// the client's statement stmt, unnamed: the unnamed statement's last Parse,
// or a named statement's definition, as the mapping keeps them (nil when
// it does not).
func (c *client) scatterParse(stmt []byte) []byte {
	if !c.tracking {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(stmt) == 0 {
		return bytes.Clone(c.mu.unnamedParse)
	}
	cs := c.mu.stmts[string(stmt)]
	if cs == nil {
		return nil
	}
	return wire.AppendParse(nil, "", cs.Def.Query, cs.Def.Types)[5:]
}

// scatterRead relays the replies of a scatter's servers, one database
// after the other, as one answer; parsed as for scatterRun.
func (l *link) scatterRead(jobs []*scatterJob, kind shard.ScatterKind, replayed bool) (step loopStep, parsed bool) {
	c := l.c
	g := session.NewGather(kind, replayed, jobs[0].db)
	timeout := c.settings().QueryTimeout
	for i, j := range jobs {
		g.Next(i)
		if j.s == nil {
			g.Lost(j.db, "was lost")
			continue
		}
		if g.Failed() {
			j.cancel()
		}
		if timeout > 0 {
			j.s.conn.SetReadDeadline(time.Now().Add(timeout))
		}
		for !j.done && j.s != nil {
			typ, msg, err := j.reply()
			if err != nil {
				g.Lost(j.db, "failed: "+err.Error())
				break
			}
			if typ == wire.MsgReadyForQuery {
				j.done = true
				continue
			}
			switch g.Reply(j.db, typ, msg) {
			case session.Relay:
				c.w.Write(msg)
			case session.Fail:
				for _, other := range jobs[i+1:] {
					other.cancel()
				}
			}
		}
		if j.s != nil {
			j.s.conn.SetReadDeadline(time.Time{})
		}
	}
	return l.answerQuery(g.Answer()), g.ParseAcked()
}

// reply reads the job's server's next message whole; on an error the
// server is lost.
func (j *scatterJob) reply() (typ byte, msg []byte, err error) {
	if typ, _, err = j.s.r.Next(); err == nil {
		msg, err = j.s.r.Message()
	}
	if err != nil {
		j.lost("scatter read failed")
	}
	return typ, msg, err
}

// scatterEach runs a statement shard=all names on each database in turn
// (DDL, a write), each in its own transaction: the client gets the first
// database's CommandComplete when every one succeeded, else an error whose
// DETAIL says how each database fared. q is a Query or an extended batch
// (replayed: its Parse is one the client did not send); a batch's
// ParseComplete, BindComplete, ParameterDescription and NoData are the
// first database's, sent ahead of that CommandComplete.
func (l *link) scatterEach(jobs []*scatterJob, q []byte, replayed bool) (step loopStep, parsed bool) {
	e := session.NewEach(len(jobs), replayed)
	for i, j := range jobs {
		e.Next(i)
		j.s.w.Write(q)
		if err := j.s.w.Flush(); err != nil {
			j.lost("scatter write failed")
			e.Lost(err.Error())
		}
		for !j.done && j.s != nil {
			typ, msg, err := j.reply()
			if err != nil {
				e.Lost(err.Error())
				break
			}
			if typ == wire.MsgReadyForQuery {
				j.done = true
				continue
			}
			e.Reply(typ, msg)
		}
		e.Done(j.db)
	}
	out, ok := e.Answer()
	return l.answerQuery(out), ok
}

// cancel asks the job's server to stop its query.
func (j *scatterJob) cancel() {
	if j.s == nil || j.done {
		return
	}
	j.s.cancelStarted()
	_ = j.s.sendCancel(cancelWait(j.pool.svc.settings()))
	j.pool.cancelDone(j.s)
}

// lost closes the job's server.
func (j *scatterJob) lost(reason string) {
	if j.s != nil {
		j.pool.discard(j.s, reason)
		j.s = nil
	}
}

// finish gives the job's server back: clean after its ReadyForQuery,
// else closed.
func (j *scatterJob) finish() {
	if j.s == nil {
		return
	}
	if j.done {
		j.pool.release(j.s)
	} else {
		j.pool.discard(j.s, "scatter ended early")
	}
	j.s = nil
}

// answerQuery ends a Query the pooler answered (consumed) with out and
// ReadyForQuery.
func (l *link) answerQuery(out []byte) loopStep {
	c := l.c
	out = wire.AppendReadyForQuery(out, c.heldStatus())
	if err := c.w.Write(out); err != nil {
		return c.leaveStep(err)
	}
	if err := c.w.Flush(); err != nil {
		return c.leaveStep(err)
	}
	return stepNext
}

// answerQueryError ends a consumed Query with an ERROR.
func (l *link) answerQueryError(code, msg, detail, hint string) loopStep {
	return l.answerQuery(wire.AppendErrorResponse(nil, wire.MsgErrorResponse, "ERROR", code, msg, detail, hint))
}

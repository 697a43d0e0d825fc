package pooler

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/admission"
	"github.com/pgturnstile/pgturnstile/admission/classify"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/wire"
)

// Admission control (admission_file). Without a policy nothing here runs and
// a client that finds no idle server waits in the pool's FIFO queue up to
// query_wait_timeout, exactly as in PgBouncer.
//
// With a policy, a client that needs a server first takes a ticket from its
// pool's admission.Gate, classified by the policy from its session (user,
// database, application_name, startup options) and the first statement of
// the transaction (a tag comment). The ticket is held until the server goes
// back to the pool, so a transaction once admitted is never shed. A shed
// client gets ERROR 53000 (never FATAL) and stays connected.
//
// The gate's capacity is the pool's live plus connecting servers, capped by
// pool_size: after a churn event the few servers that exist go to whoever
// priority and fairness pick, while the pool reopens connections (paced by
// the connect bucket) for the demand waiting at the gate.

// admissionPolicy is what admission_file held at the last (re)load.
type admissionPolicy struct {
	file   string
	policy *classify.Policy
}

// loadAdmission reads admission_file; nil when none is configured.
func loadAdmission(st *config.Settings) (*admissionPolicy, error) {
	if st.AdmissionFile == "" {
		return nil, nil
	}
	pol, err := classify.Load(st.AdmissionFile)
	if err != nil {
		return nil, err
	}
	return &admissionPolicy{file: st.AdmissionFile, policy: pol}, nil
}

// poolGate is a pool's gate and what it was built from: the policy,
// pool_size and query_wait_timeout of one generation, gen (the newest
// generation a link asked the gate for).
type poolGate struct {
	gate     *admission.Gate
	gen      *generation
	policy   *admissionPolicy
	poolSize int
	maxWait  time.Duration
}

// gateFor returns the pool's gate under the admission policy and pool
// settings of generation g, which has a policy, rebuilding it when the
// policy, pool_size or query_wait_timeout changed. A reload swaps the gate
// atomically for new arrivals; tickets of the old one go back to it. A
// link that took g before a RELOAD whose generation the gate was already
// built for is not given a gate of g again (which would rebuild it back
// and forth): it gets the newer generation with the gate, and goes on
// under that one as a whole. nil (PAUSE): no gate to pass.
func (p *serverPool) gateFor(g *generation) *poolGate {
	p.mu.Lock()
	if pg := p.gate; pg != nil && pg.gen.seq > g.seq {
		g = pg.gen
	}
	pg, warning := p.gateForLocked(p.viewIn(g))
	p.mu.Unlock()
	if warning != "" {
		p.log.Warn(warning) // not under p.mu: no I/O under a pool's lock
	}
	return pg
}

// gateForLocked is gateFor under p.mu, for the view v (whose generation
// has a policy); a warning to log comes back.
func (p *serverPool) gateForLocked(v *poolView) (_ *poolGate, warning string) {
	if p.paused {
		// PAUSE holds clients until RESUME, as in PgBouncer, rather than
		// letting CoDel shed them.
		return nil, ""
	}
	ap, size, maxWait := v.gen.adm, v.eff.PoolSize, v.st.QueryWaitTimeout
	if pg := p.gate; pg != nil && pg.policy == ap && pg.poolSize == size && pg.maxWait == maxWait {
		if pg.gen != v.gen {
			pg = &poolGate{gate: pg.gate, gen: v.gen, policy: ap, poolSize: size, maxWait: maxWait}
			p.gate = pg
		}
		return pg, ""
	}
	cfg := ap.policy.GateConfig()
	cfg.PoolSize = max(size, 1)
	cfg.MaxWait = maxWait
	cfg.Clock = gateClock{p.svc.clock}
	// A gate rebuilt for a pool that had one, or for a closed pool, does
	// not treat zero capacity as a start-up.
	cfg.Started = p.gate != nil || p.closed
	g := admission.NewGate(cfg, p.gateCapacityLocked())
	g.SetPool(p.gateCapacityLocked(), p.connecting)
	if !g.Fair() && cfg.Tree != nil && cfg.Tree.Leaves() > 1 {
		// PGKeeper's caveat: a pool too small to slice makes fair shares
		// rounding noise; the gate then serves each tier in FIFO order.
		warning = fmt.Sprintf("admission: pool_size %d is under 4 slots per category (%d categories): fair sharing is off for this pool", size, cfg.Tree.Leaves())
	}
	p.gate = &poolGate{gate: g, gen: v.gen, policy: ap, poolSize: size, maxWait: maxWait}
	// Every tier's wait histogram exists, empty, from the gate's start,
	// as the gate's gauges do (metrics.go).
	for prio := range ap.policy.Tiers() {
		p.svc.admInstruments.wait(p, ap, prio)
	}
	return p.gate, warning
}

// gateCapacityLocked is what the gate may hand out: servers that exist or
// are logging in, within pool_size, and at least one, so a pool that shrank
// to no servers (server_idle_timeout) admits the transaction that reopens
// one instead of shedding everyone at zero capacity. Only a closed pool
// (pool_size=0 in [pools] or SET POOL) has none: its clients are shed.
func (p *serverPool) gateCapacityLocked() int {
	if p.closed {
		return 0
	}
	n := max(p.total, 1)
	if p.eff.PoolSize > 0 {
		n = min(n, p.eff.PoolSize)
	}
	return n
}

// syncGateLocked follows the gate's capacity, and the logins in flight,
// after the pool's server count changed. While servers log in (warm-up,
// RECONNECT, churn) the gate lets the top tier wait for them up to
// query_wait_timeout instead of shedding it by CoDel (admission/doc.go).
func (p *serverPool) syncGateLocked() {
	if p.gate != nil {
		p.gate.gate.SetPool(p.gateCapacityLocked(), p.connecting)
	}
}

// gateWaitingLocked is the demand queued at the gate, which the pool opens
// servers for.
func (p *serverPool) gateWaitingLocked() int {
	if p.gate == nil {
		return 0
	}
	return p.gate.gate.Waiting()
}

// noteDemand opens servers for clients that just queued at the gate.
func (p *serverPool) noteDemand() {
	p.mu.Lock()
	p.growLocked(p.svc.clock.Now(), false)
	p.mu.Unlock()
}

// shedError is a gate's refusal with the policy that decided it, on its way
// from link to the serve loop.
type shedError struct {
	*admission.ShedError
	policy *admissionPolicy
}

// admitResult carries the gate's decision to the waiting client.
type admitResult struct {
	t   admission.Ticket
	err error
}

// admit takes a ticket for the transaction starting with the message typ
// (body not consumed). It waits at the gate; a CancelRequest ends the wait
// with errWaitCanceled, a shed with *admission.ShedError.
func (l *link) admit(g *admission.Gate, ap *admissionPolicy, typ byte, n int) (admission.Ticket, error) {
	c := l.c
	class := c.classify(ap.policy, typ, n)
	if c.adm == nil {
		c.adm = &clientAdmission{}
	}
	a := c.adm
	if a.admitCh == nil {
		// Made once per client, so a decision allocates nothing here.
		ch := make(chan admitResult, 1)
		a.admitCh = ch
		a.onAdmit = func(t admission.Ticket, err error) { ch <- admitResult{t, err} }
	}
	ch := a.admitCh
	start := c.svc.clock.Now()
	r := g.Submit(class, a.onAdmit)
	if r != nil {
		l.mu.pool.noteDemand()
	}
	var res admitResult
	select {
	case res = <-ch:
	case <-l.mu.cancelWait:
		if g.Cancel(r) {
			l.countAdmission(ap, class, "cancelled", c.svc.clock.Since(start))
			return admission.Ticket{}, errWaitCanceled
		}
		res = <-ch
		if res.err == nil {
			g.Release(res.t)
		}
		l.countAdmission(ap, class, "cancelled", c.svc.clock.Since(start))
		return admission.Ticket{}, errWaitCanceled
	}
	outcome := "admitted"
	switch {
	case res.err != nil:
		var shed *admission.ShedError
		if errors.As(res.err, &shed) {
			outcome = "shed_" + shed.Reason.String()
		} else {
			outcome = "error"
		}
	case r != nil:
		outcome = "admitted_after_wait"
	}
	l.countAdmission(ap, class, outcome, c.svc.clock.Since(start))
	return res.t, res.err
}

// classify derives the transaction's class from the session and the first
// statement's tag comment: the text of a simple Query, of a Parse, or of the
// statement a Bind refers to (recorded when the client parsed it).
func (c *client) classify(pol *classify.Policy, typ byte, n int) admission.Class {
	sess := c.admSession(pol)
	var sql []byte
	switch typ {
	case wire.MsgQuery, wire.MsgParse, wire.MsgBind:
		body, err := c.r.Peek(min(n, clientReadBuffer-5))
		if err != nil {
			break
		}
		switch typ {
		case wire.MsgQuery:
			sql = body
		case wire.MsgParse:
			if i := bytes.IndexByte(body, 0); i >= 0 {
				sql = body[i+1:]
			}
		case wire.MsgBind:
			sql = c.boundStatementText(body)
		}
		if i := bytes.IndexByte(sql, 0); i >= 0 {
			sql = sql[:i]
		}
	}
	return pol.Classify(sess, sql)
}

// boundStatementText returns the SQL of the statement a Bind body names, as
// the client parsed it, or nil when the pooler did not record it.
func (c *client) boundStatementText(body []byte) []byte {
	_, name, _, ok := wire.DecodeBindHead(body)
	if !ok {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(name) == 0 {
		_, query, _, _ := wire.DecodeParse(c.mu.unnamedParse)
		return query
	}
	if cs := c.mu.stmts[string(name)]; cs != nil {
		return []byte(cs.Def.Query)
	}
	return nil
}

// admSession is the client's session-level class under pol, recomputed
// when the policy or application_name changed.
func (c *client) admSession(pol *classify.Policy) *classify.Session {
	app := c.params["application_name"]
	if c.adm == nil {
		c.adm = &clientAdmission{}
	}
	if c.adm.policy != pol || c.adm.app != app {
		c.adm.policy, c.adm.app = pol, app
		c.adm.session = pol.Session(c.user, c.dbName, app, c.adm.opts)
	}
	return &c.adm.session
}

// appendOptionNotices appends a NOTICE for each admission option of the
// startup packet (-c pgturnstile.KEY=VALUE) that the policy in force
// ignores or changes (classify.OptionIssues): an unknown key, a priority
// that names no tier, one above the user's max_priority (clamped), and
// counts each in pgturnstile_admission_option_notices_total. Without an
// admission policy the options do nothing and nothing is said: the same
// options may be meant for a policy a RELOAD brings.
func (c *client) appendOptionNotices(out []byte) []byte {
	if c.adm == nil || len(c.adm.opts) == 0 {
		return out
	}
	ap := c.svc.gen.Load().adm
	if ap == nil {
		return out
	}
	pol := ap.policy
	for _, is := range pol.OptionIssues(c.user, c.dbName, c.params["application_name"], c.adm.opts) {
		msg, detail := pol.OptionNotice(is)
		out = wire.AppendErrorResponse(out, wire.MsgNoticeResponse, "NOTICE", "00000", msg, detail, "")
		labels := ""
		if c.pool != nil {
			labels = c.pool.metrics.labels + ","
		}
		c.svc.metrics.GetOrCreateCounter(fmt.Sprintf(`pgturnstile_admission_option_notices_total{%sreason="%s"}`, labels, is.Reason)).Inc()
	}
	return out
}

// clientAdmission is a client's admission state.
type clientAdmission struct {
	opts    []classify.OptionTag // pgturnstile.* keys from the startup options
	policy  *classify.Policy
	app     string
	session classify.Session
	// admitCh is the gate's answer to the current wait; onAdmit sends to it.
	admitCh chan admitResult
	onAdmit func(admission.Ticket, error)
}

// shed answers a request the gate refused: ERROR (SQLSTATE 53000 or the
// policy's shed_sqlstate) with a machine-readable DETAIL and a HINT; then
// ReadyForQuery for a simple Query, or, in the extended protocol, the rest
// of the batch is dropped up to its Sync, as after a server error. The
// client stays connected.
func (c *client) shed(typ byte, ap *admissionPolicy, e *admission.ShedError) error {
	if err := c.r.Skip(); err != nil {
		return err
	}
	pol := ap.policy
	out := wire.AppendErrorResponse(c.scratch[:0], wire.MsgErrorResponse, "ERROR", pol.ShedSQLState(),
		classify.ShedMessage, pol.ShedDetail(e), classify.ShedHint)
	return c.refuse(typ, out)
}

// admissionCounters caches the decision counters: label formatting stays
// off the path of every decision.
type admissionCounterKey struct {
	pool     poolKey
	priority int
	leaf     admission.LeafID
	outcome  string
	policy   *admissionPolicy
}

type admissionInstruments struct {
	decisions sync.Map // admissionCounterKey → *metrics.Counter
	waits     sync.Map // waitKey → *metrics.PrometheusHistogram
}

type waitKey struct {
	pool     poolKey
	priority int
	policy   *admissionPolicy
}

// countAdmission records one decision and how long it took.
func (l *link) countAdmission(ap *admissionPolicy, class admission.Class, outcome string, waited time.Duration) {
	c := l.c
	in := &c.svc.admInstruments
	p := l.mu.pool // the gate's: the transaction's pool
	k := admissionCounterKey{pool: p.key, priority: class.Priority, leaf: class.Leaf, outcome: outcome, policy: ap}
	v, ok := in.decisions.Load(k)
	if !ok {
		name := fmt.Sprintf(`pgturnstile_admission_decisions_total{%s,priority="%s",category="%s",outcome="%s"}`,
			p.metrics.labels, labelValue(ap.policy.PriorityName(class.Priority)), labelValue(ap.policy.CategoryLabel(class.Leaf)), outcome)
		v, _ = in.decisions.LoadOrStore(k, c.svc.metrics.GetOrCreateCounter(name))
	}
	v.(*metrics.Counter).Inc()
	in.wait(p, ap, class.Priority).Update(waited.Seconds())
}

// wait is the pool's admission wait histogram for a priority.
func (in *admissionInstruments) wait(p *serverPool, ap *admissionPolicy, priority int) *metrics.PrometheusHistogram {
	wk := waitKey{pool: p.key, priority: priority, policy: ap}
	h, ok := in.waits.Load(wk)
	if !ok {
		name := fmt.Sprintf(`pgturnstile_admission_wait_seconds{%s,priority="%s"}`,
			p.metrics.labels, labelValue(ap.policy.PriorityName(priority)))
		h, _ = in.waits.LoadOrStore(wk, p.svc.metrics.GetOrCreatePrometheusHistogramExt(name, latencyBuckets))
	}
	return h.(*metrics.PrometheusHistogram)
}

// Admission lists every pool's gate for SHOW ADMISSION and the metrics.
func (v consoleView) Admission() []admin.AdmissionRow {
	s := v.s
	ap := s.gen.Load().adm
	if ap == nil {
		return nil
	}
	var out []admin.AdmissionRow
	for _, p := range s.allPools() {
		p.mu.Lock()
		pg := p.gate
		p.mu.Unlock()
		if pg == nil || pg.policy != ap {
			continue
		}
		out = append(out, admin.AdmissionRows(p.key.db, p.key.user, pg.gate.Snapshot(), ap.policy.PriorityName)...)
	}
	return out
}

package etcdsource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Config is a Source's: where etcd is, the keys, the instance, and what
// to do with a map.
type Config struct {
	ClientConfig
	// Prefix is shard_etcd_prefix: "/pgturnstile", no trailing "/".
	Prefix string
	// Instance names this instance under InstancesPrefix; Listen is the
	// address it serves clients on, for its record.
	Instance, Listen string
	// Apply checks a map (the document, its name in messages, its mod
	// revision) and puts it in force; an error refuses it. It is called
	// from the source's goroutine, one map at a time.
	Apply func(doc []byte, name string, revision int64) error
	// Pauses receives the fleet's paused ranges (PausesPrefix: one key
	// per colocation, written by `pgturnstile shard move`) whenever they
	// change, whole: at each session's first read and at each change.
	// It must not block; the instance confirms each pause, once no
	// transaction in its range runs, with Ack. Nil: the instance takes
	// no part in moves.
	Pauses func(map[string]Pause)
	// Log receives the source's lines; nil: slog.Default().
	Log *slog.Logger

	// LeaseTTL is the instance record's lease: how long it outlives an
	// instance that died or lost etcd; 0 = 10 s.
	LeaseTTL time.Duration
	// ProbeInterval is how often a session checks that etcd answers;
	// 0 = 1 s.
	ProbeInterval time.Duration
}

// Status is the source's state, for SHOW SHARD_INSTANCES and /metrics.
type Status struct {
	// Connected: the current session read the map and etcd answered its
	// last probe.
	Connected bool
	// Revision is the map's mod revision in force (0: none yet).
	Revision int64
	// Latest is the newest mod revision of the map's key seen, in force
	// or refused (0: none).
	Latest int64
	// Rejected counts the maps refused (Apply's errors, a deleted key).
	Rejected uint64
}

// Source watches the map's key and publishes this instance's record.
type Source struct {
	cfg                              Config
	log                              *slog.Logger
	mapKey, instPrefix, instKey, src string
	pausePrefix                      string
	host                             string
	cancel                           context.CancelFunc
	done                             chan struct{}
	// first is closed when the first session has read the map or
	// failed to (Start waits for it).
	first     chan struct{}
	firstOnce sync.Once

	// cli is the client, made by the first session that can (with a
	// user, making it needs etcd). Only run's goroutine sets it; Close
	// reads it after run ended.
	cli *clientv3.Client
	// lease is the current session's; run's goroutine only.
	lease clientv3.LeaseID

	mu        sync.Mutex
	connected bool
	// lost: the loss of etcd has been logged (once per outage).
	lost        bool
	revision    int64
	latest      int64
	rejected    uint64
	rejectedRev int64
	rejectedMsg string
	instances   map[string]Record
	// pauses are the fleet's pauses as last read, by key; acked and
	// ackErr what this instance confirmed of them (Ack).
	pauses map[string]Pause
	acked  map[string]int64
	ackErr map[string]string
	// ackc wakes the session to publish the record after an Ack.
	ackc chan struct{}
}

// Start starts watching: it waits for the first read of the map (at most
// DialTimeout plus a probe), so that a pooler that can reach etcd starts
// with its map in force, and goes on in the background whatever came of
// it. Close stops it.
func Start(cfg Config) (*Source, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("shard_source = etcd needs shard_etcd_endpoints")
	}
	if cfg.Apply == nil {
		return nil, errors.New("BUG: etcdsource.Start without Apply")
	}
	if cfg.Instance == "" {
		return nil, errors.New("BUG: etcdsource.Start without an instance name")
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 10 * time.Second
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = time.Second
	}
	// TLS files are read now: a missing one is a configuration error,
	// not an outage.
	if _, err := tlsConfig(cfg.ClientConfig); err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	host, _ := os.Hostname()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Source{cfg: cfg, log: log, mapKey: MapKey(cfg.Prefix), instPrefix: InstancesPrefix(cfg.Prefix),
		instKey: InstancesPrefix(cfg.Prefix) + cfg.Instance, src: SourceName(cfg.Prefix), host: host,
		pausePrefix: PausesPrefix(cfg.Prefix),
		cancel:      cancel, done: make(chan struct{}), first: make(chan struct{}), instances: map[string]Record{},
		pauses: map[string]Pause{}, acked: map[string]int64{}, ackErr: map[string]string{}, ackc: make(chan struct{}, 1)}
	go s.run(ctx)
	select {
	case <-s.first:
	case <-time.After(cfg.dialTimeout() + cfg.ProbeInterval):
	}
	return s, nil
}

// Close stops the watch and revokes the lease, so that the instance's
// record vanishes now rather than when the lease expires.
func (s *Source) Close() error {
	s.cancel()
	<-s.done
	if s.cli == nil {
		return nil
	}
	if s.lease != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = s.cli.Revoke(ctx, s.lease)
		cancel()
	}
	return s.cli.Close()
}

// Status returns the source's state.
func (s *Source) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Status{Connected: s.connected, Revision: s.revision, Latest: s.latest, Rejected: s.rejected}
}

// Instances returns the records under InstancesPrefix as of the last
// event the watch saw (kept while etcd is away), by name.
func (s *Source) Instances() []Instance {
	s.mu.Lock()
	out := make([]Instance, 0, len(s.instances))
	for id, r := range s.instances {
		out = append(out, Instance{ID: id, Record: r})
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Instance is this instance's name.
func (s *Source) Instance() string { return s.cfg.Instance }

// Name names the map in messages: "etcd:<prefix>/map".
func (s *Source) Name() string { return s.src }

func (s *Source) firstDone() { s.firstOnce.Do(func() { close(s.first) }) }

func (s *Source) run(ctx context.Context) {
	defer close(s.done)
	const minBackoff, maxBackoff = 100 * time.Millisecond, time.Second
	backoff := minBackoff
	for {
		connected, err := s.session(ctx)
		s.firstDone()
		if ctx.Err() != nil {
			return
		}
		s.disconnected(err)
		if connected {
			backoff = minBackoff
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// disconnected records the end of a session; the first of an outage is
// logged.
func (s *Source) disconnected(err error) {
	s.mu.Lock()
	s.connected = false
	first := !s.lost
	s.lost = true
	rev := s.revision
	s.mu.Unlock()
	if first {
		s.log.Warn(fmt.Sprintf("shard map: lost etcd (%v); serving revision %d until it is back", err, rev))
	}
}

// session reads the map and every instance's record, publishes this
// instance's, and follows changes until etcd fails or ctx ends. connected
// says it got as far as the read.
func (s *Source) session(ctx context.Context) (connected bool, err error) {
	if s.cli == nil {
		cli, err := NewClient(s.cfg.ClientConfig)
		if err != nil {
			return false, err
		}
		s.cli = cli
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rctx, rcancel := context.WithTimeout(sctx, s.cfg.dialTimeout())
	resp, err := s.cli.Get(rctx, s.cfg.Prefix+"/", clientv3.WithPrefix())
	rcancel()
	if err != nil {
		return false, err
	}
	lctx, lcancel := context.WithTimeout(sctx, s.cfg.dialTimeout())
	grant, err := s.cli.Grant(lctx, int64((s.cfg.LeaseTTL+time.Second-1)/time.Second))
	lcancel()
	if err != nil {
		return false, err
	}
	old := s.lease
	s.lease = grant.ID
	if old != 0 {
		// The record moves to the new lease below; the old one, if it
		// has not expired, would only delete it later.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, _ = s.cli.Revoke(ctx, old)
			cancel()
		}()
	}
	s.mu.Lock()
	wasLost := s.lost
	s.connected, s.lost = true, false
	s.instances = map[string]Record{}
	s.mu.Unlock()
	if wasLost {
		s.log.Info("shard map: etcd is back")
	}
	var mapKV bool
	pauses := map[string]Pause{}
	for _, kv := range resp.Kvs {
		switch k := string(kv.Key); {
		case k == s.mapKey:
			mapKV = true
			s.consider(kv.Value, kv.ModRevision)
		case strings.HasPrefix(k, s.instPrefix):
			s.sawInstance(k, kv.Value)
		case strings.HasPrefix(k, s.pausePrefix):
			pauses[strings.TrimPrefix(k, s.pausePrefix)] = readPause(kv)
		}
	}
	// The pauses read with the map are handed over before the record
	// is written and before Start returns: an instance never serves a
	// map without the pauses that came with it.
	s.setPauses(pauses)
	if !mapKV {
		s.mu.Lock()
		rev := s.revision
		s.mu.Unlock()
		if rev == 0 {
			s.log.Warn("shard map: no map at " + s.mapKey + " yet (pgturnstile shard publish)")
		}
	}
	if err := s.publish(sctx); err != nil {
		return true, err
	}
	s.firstDone()
	// The probe runs beside the rest: Watch blocks until etcd has set
	// the watch up, and etcd may be gone by then. A failed probe ends
	// the session's context, which ends whatever waits on etcd.
	probeErr := make(chan error, 1)
	go s.probe(sctx, cancel, probeErr)
	ended := func(err error) error {
		select {
		case perr := <-probeErr:
			return perr
		default:
			return err
		}
	}
	ka, err := s.cli.KeepAlive(sctx, s.lease)
	if err != nil {
		return true, ended(err)
	}
	// WithRequireLeader: a member cut off from its cluster's leader
	// ends the watch rather than going silent.
	wch := s.cli.Watch(clientv3.WithRequireLeader(sctx), s.cfg.Prefix+"/", clientv3.WithPrefix(),
		clientv3.WithRev(resp.Header.Revision+1))
	for {
		select {
		case <-sctx.Done():
			return true, ended(sctx.Err())
		case _, ok := <-ka:
			if !ok {
				return true, ended(errors.New("the instance's lease could not be kept alive"))
			}
		case <-s.ackc:
			if err := s.publish(sctx); err != nil {
				s.log.Warn("shard map: cannot publish this instance's pauses: " + err.Error())
			}
		case wr, ok := <-wch:
			if !ok {
				return true, ended(errors.New("watch ended"))
			}
			if err := wr.Err(); err != nil {
				// A compacted revision among them: the next session
				// reads the key afresh.
				return true, ended(err)
			}
			for _, ev := range wr.Events {
				s.event(sctx, ev)
			}
		}
	}
}

// probe reads the map's key every ProbeInterval (linearizable: it needs
// the cluster's leader) until one read fails: it sends the error and ends
// the session.
func (s *Source) probe(ctx context.Context, endSession context.CancelFunc, failed chan<- error) {
	t := time.NewTicker(s.cfg.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, s.cfg.ProbeInterval)
		_, err := s.cli.Get(pctx, s.mapKey, clientv3.WithCountOnly())
		cancel()
		if err != nil && ctx.Err() == nil {
			failed <- err
			endSession()
			return
		}
	}
}

// event handles one change under the prefix.
func (s *Source) event(ctx context.Context, ev *clientv3.Event) {
	k := string(ev.Kv.Key)
	switch {
	case k == s.mapKey:
		if ev.Type == clientv3.EventTypeDelete {
			s.refuse(ev.Kv.ModRevision, errors.New("the map's key was deleted"))
		} else if !s.consider(ev.Kv.Value, ev.Kv.ModRevision) {
			return
		}
		if err := s.publish(ctx); err != nil {
			// The session's probe or keep-alive will end it; the
			// next one publishes again.
			s.log.Warn("shard map: cannot publish this instance's revision: " + err.Error())
		}
	case strings.HasPrefix(k, s.pausePrefix):
		s.mu.Lock()
		pauses := maps.Clone(s.pauses)
		s.mu.Unlock()
		if ev.Type == clientv3.EventTypeDelete {
			delete(pauses, strings.TrimPrefix(k, s.pausePrefix))
		} else {
			pauses[strings.TrimPrefix(k, s.pausePrefix)] = readPause(ev.Kv)
		}
		if s.setPauses(pauses) {
			if err := s.publish(ctx); err != nil {
				s.log.Warn("shard map: cannot publish this instance's pauses: " + err.Error())
			}
		}
	case strings.HasPrefix(k, s.instPrefix):
		if ev.Type == clientv3.EventTypeDelete {
			s.mu.Lock()
			delete(s.instances, strings.TrimPrefix(k, s.instPrefix))
			s.mu.Unlock()
			return
		}
		s.sawInstance(k, ev.Kv.Value)
	}
}

// consider hands a map to Apply unless it is the revision in force or
// one already refused; changed says the instance's record changed.
func (s *Source) consider(doc []byte, rev int64) (changed bool) {
	s.mu.Lock()
	seen := rev == s.revision || rev == s.rejectedRev
	s.latest = max(s.latest, rev)
	s.mu.Unlock()
	if seen {
		return false
	}
	if err := s.cfg.Apply(doc, s.src, rev); err != nil {
		s.refuse(rev, err)
		return true
	}
	s.mu.Lock()
	old := s.revision
	s.revision = rev
	s.mu.Unlock()
	s.log.Info(fmt.Sprintf("shard map: revision %d of %s in force (was %d)", rev, s.mapKey, old))
	return true
}

// refuse counts and logs a map that is not put in force.
func (s *Source) refuse(rev int64, err error) {
	s.mu.Lock()
	s.rejected++
	s.rejectedRev, s.rejectedMsg = rev, err.Error()
	s.latest = max(s.latest, rev)
	kept := s.revision
	s.mu.Unlock()
	s.log.Error(fmt.Sprintf("shard map: revision %d of %s refused, revision %d kept: %v", rev, s.mapKey, kept, err))
}

func (s *Source) sawInstance(key string, value []byte) {
	var r Record
	if err := json.Unmarshal(value, &r); err != nil {
		r = Record{Rejected: "unreadable record: " + err.Error()}
	}
	s.mu.Lock()
	s.instances[strings.TrimPrefix(key, s.instPrefix)] = r
	s.mu.Unlock()
}

// publish writes this instance's record under its lease.
func (s *Source) publish(ctx context.Context) error {
	s.mu.Lock()
	r := Record{Revision: s.revision, Host: s.host, PID: os.Getpid(), Listen: s.cfg.Listen, Time: time.Now().UTC().Truncate(time.Millisecond),
		RejectedRevision: s.rejectedRev, Rejected: s.rejectedMsg}
	if len(s.acked) > 0 {
		r.Paused = maps.Clone(s.acked)
	}
	if len(s.ackErr) > 0 {
		r.PauseErrors = maps.Clone(s.ackErr)
	}
	s.mu.Unlock()
	value, err := json.Marshal(r)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.dialTimeout())
	defer cancel()
	_, err = s.cli.Put(pctx, s.instKey, string(value), clientv3.WithLease(s.lease))
	return err
}

// setPauses makes pauses the fleet's pauses: what changed goes to
// Config.Pauses, and the confirmations of pauses gone (or replaced by a
// new revision) are forgotten. changed: the record changed.
func (s *Source) setPauses(pauses map[string]Pause) (changed bool) {
	s.mu.Lock()
	same := maps.EqualFunc(s.pauses, pauses, func(a, b Pause) bool { return a.Revision == b.Revision })
	s.pauses = pauses
	for k, rev := range s.acked {
		if p, ok := pauses[k]; !ok || p.Revision != rev {
			delete(s.acked, k)
			changed = true
		}
	}
	for k := range s.ackErr {
		if _, ok := pauses[k]; !ok {
			delete(s.ackErr, k)
			changed = true
		}
	}
	s.mu.Unlock()
	if !same && s.cfg.Pauses != nil {
		s.cfg.Pauses(maps.Clone(pauses))
	}
	return changed
}

// Ack confirms the pause key at revision rev: no transaction in its
// range runs on this instance (err nil), or the instance could not pause
// it (err says why). It is published in the instance's record, which is
// what `pgturnstile shard move` waits for. An Ack of a pause that has
// gone or changed since is dropped.
func (s *Source) Ack(key string, rev int64, err error) {
	s.mu.Lock()
	if p, ok := s.pauses[key]; !ok || p.Revision != rev {
		s.mu.Unlock()
		return
	}
	if err != nil {
		s.ackErr[key] = err.Error()
	} else {
		s.acked[key] = rev
		delete(s.ackErr, key)
	}
	s.mu.Unlock()
	select {
	case s.ackc <- struct{}{}:
	default:
	}
}

package pooler

import (
	"fmt"
	"io"

	"github.com/VictoriaMetrics/metrics"
	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/shard"
)

// The glue of a shard map that comes from elsewhere than shard_file
// (shard_source = etcd). The source itself (package shard/etcdsource,
// started by cmd/pgturnstile) watches etcd and hands each new map to
// ApplyShardMap; the service keeps the document, checks it against the
// [databases] in force, and publishes a generation that differs from the
// one in force by its map alone. A transaction that has begun keeps the
// map it started with (it holds its generation's router), as after a
// RELOAD. A RELOAD checks the kept document again against the new
// [databases]: a map the new configuration cannot serve fails the RELOAD,
// and the configuration in force stays.

// ShardSource is what SHOW SHARD_INSTANCES and /metrics read of a shard map
// source other than shard_file.
type ShardSource interface {
	ShardSourceState() ShardSourceState
}

// ShardSourceState is a shard map source's state.
type ShardSourceState struct {
	// Connected: the source reaches its store now.
	Connected bool
	// Latest is the newest revision of the map the source has seen,
	// refused or not; the revision in force is the generation's.
	Latest int64
	// Rejected counts the maps refused.
	Rejected uint64
	// Instances are the fleet's records, this instance's included.
	Instances []admin.ShardInstanceRow
	// Self names this instance among them.
	Self string
}

// extShardMap is the document of the map in force from a source, kept
// for RELOAD to check again.
type extShardMap struct {
	doc      []byte
	name     string
	revision int64
}

type shardSourceRef struct{ src ShardSource }

// SetShardSource tells the service which source feeds ApplyShardMap, for
// SHOW SHARD_INSTANCES and /metrics.
func (s *Service) SetShardSource(src ShardSource) {
	s.shardSource.Store(&shardSourceRef{src: src})
}

func (s *Service) shardSourceState() (ShardSourceState, bool) {
	ref := s.shardSource.Load()
	if ref == nil || ref.src == nil {
		return ShardSourceState{}, false
	}
	return ref.src.ShardSourceState(), true
}

// ApplyShardMap checks a shard map document from the source (name names it
// in errors, as a path names a shard file) against the [databases] in
// force, with every check of a shard file, and puts it in force. An error
// leaves the map in force as it was. It is for shard_source = etcd; under
// shard_source = file it is refused.
func (s *Service) ApplyShardMap(doc []byte, name string, revision int64) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	cur := s.gen.Load()
	if cur.shardSrc != "etcd" {
		return fmt.Errorf("shard_source is %s, not etcd", cur.shardSrc)
	}
	m, err := shard.Parse(doc, name, databaseNames(cur.cfg))
	if err != nil {
		return err
	}
	next := *cur
	next.shards, next.shardRev = m, revision
	next.seq = s.genSeq.Add(1)
	s.extShard = &extShardMap{doc: doc, name: name, revision: revision}
	s.gen.Store(&next)
	return nil
}

// deriveShards is derive's part for the shard map: shard_file read again,
// or the source's document checked again against cfg's [databases].
// src is the source chosen at start (shard_source is read at start only).
func (s *Service) deriveShards(g *generation, src, file string) error {
	g.shardSrc = src
	var err error
	switch src {
	case "etcd":
		if e := s.extShard; e != nil {
			if g.shards, err = shard.Parse(e.doc, e.name, databaseNames(g.cfg)); err != nil {
				return fmt.Errorf("the shard map in force (revision %d) does not fit this configuration: %w", e.revision, err)
			}
			g.shardRev = e.revision
		}
	default:
		if file != "" {
			g.shards, err = shard.Load(file, databaseNames(g.cfg))
		}
	}
	return err
}

// ShardInstances is SHOW SHARD_INSTANCES: the fleet's records as the
// source last saw them; empty without a source.
func (v consoleView) ShardInstances() []admin.ShardInstanceRow {
	st, ok := v.s.shardSourceState()
	if !ok {
		return nil
	}
	rows := make([]admin.ShardInstanceRow, len(st.Instances))
	for i, r := range st.Instances {
		r.Latest = st.Latest
		r.Self = r.Instance == st.Self
		rows[i] = r
	}
	return rows
}

// writeShardSourceMetrics writes the source's state: whether it reaches
// its store, the revision in force and the newest seen, the maps refused,
// and how many instances published a record and serve the newest map.
func (s *Service) writeShardSourceMetrics(w io.Writer, g *generation) {
	st, ok := s.shardSourceState()
	if !ok {
		return
	}
	connected := uint64(0)
	if st.Connected {
		connected = 1
	}
	converged := 0
	for _, in := range st.Instances {
		if in.Revision == st.Latest {
			converged++
		}
	}
	metrics.WriteGaugeUint64(w, "pgturnstile_shard_source_connected", connected)
	metrics.WriteGaugeUint64(w, "pgturnstile_shard_map_revision", uint64(max(g.shardRev, 0)))
	metrics.WriteGaugeUint64(w, "pgturnstile_shard_map_latest_revision", uint64(max(st.Latest, 0)))
	metrics.WriteCounterUint64(w, "pgturnstile_shard_map_rejected_total", st.Rejected)
	metrics.WriteGaugeUint64(w, "pgturnstile_shard_instances", uint64(len(st.Instances)))
	metrics.WriteGaugeUint64(w, "pgturnstile_shard_instances_converged", uint64(converged))
}

// shardMapPending says a login's database may be a cluster whose map has
// not arrived: the map comes from etcd, none was ever put in force, and
// the name is not a [databases] entry of its own (one the "*" entry would
// serve could be a cluster's, which must not reach a database of that
// name).
func shardMapPending(g *generation, dbName string) bool {
	if g.shardSrc != "etcd" || g.shards != nil {
		return false
	}
	_, own := g.cfg.Databases[dbName]
	return !own
}

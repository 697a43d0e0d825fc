// Package etcdsource keeps the sharding router's map in etcd
// (shard_source = etcd): every pgturnstile instance of a fleet watches one
// key, hands each new revision of it to the pooler to check and apply, and
// publishes the revision it serves under a lease, so that the fleet's state
// can be read from etcd (SHOW SHARD_INSTANCES, `pgturnstile shard status`).
//
// # Keys
//
// Under a prefix P (shard_etcd_prefix, "/pgturnstile" by default):
//
//	P/map                   the shard file's TOML, one document for every
//	                        cluster: a change is one atomic put
//	P/instances/<instance>  JSON (Record): the mod revision of P/map the
//	                        instance serves, its host, pid, listen
//	                        address, when it wrote this, and the last
//	                        revision it refused with the reason; attached
//	                        to the instance's lease, so it vanishes when
//	                        the instance dies or loses etcd for longer
//	                        than the lease's TTL
//
// # The watch
//
// One goroutine (Source.run) runs sessions. A session reads everything
// under P/ with one Get (the map and every instance's record, at one
// revision), grants a lease and writes the instance's record, then watches
// P/ from the Get's revision + 1, and probes etcd every ProbeInterval with
// a linearizable read of the map's key. A probe that fails, a watch that
// ends or reports an error (a compacted revision included), or a lease
// whose keep-alive stops ends the session: the source counts itself
// disconnected, logs it once, and starts a new session after a backoff
// (100 ms doubling to 1 s). Because each session starts with a fresh read
// of the key, what was missed while etcd was away (or compacted since) is
// caught up in one step; revisions the pooler already serves are not
// handed over again.
//
// A map is handed to Config.Apply with its mod revision; an error refuses
// it: the source logs the reason, counts it (Status.Rejected) and writes it
// into its record, and the pooler keeps the map it had. A deleted key is
// refused the same way. Nothing here stops traffic: while etcd is away the
// pooler serves its last map.
//
// The package knows nothing of the pooler: cmd/pgturnstile wires Apply to
// pooler.Service.ApplyShardMap and the state to SHOW SHARD_INSTANCES and
// /metrics. Tests run a real etcd server in-process (internal/etcdtest).
package etcdsource

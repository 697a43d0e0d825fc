// Package shard is pgturnstile's sharding router, without the pooler: the
// shard map read from the shard file, Postgres' partition hash, the key
// scanner, the hints and the routing decision for a statement (issue 34). It is pure: no sockets, no goroutines, no import
// of package pooler, and nothing it does per routed statement allocates.
//
// # Placement
//
// A key's logical shard is the partition Postgres itself would choose for
// it in a table PARTITION BY HASH (key) whose partitions have MODULUS
// logical_shards: the REMAINDER of
//
//	hash_combine64(0, H(key, HASH_PARTITION_SEED)) mod logical_shards
//
// with H the key type's extended hash function (hashint8extended for
// smallint, integer and bigint, which hash equal values alike;
// hashtextextended for text and varchar under a deterministic collation;
// uuid_hash_extended). A NULL key has row hash 0 and lands in logical
// shard 0, as in Postgres. Because logical_shards is a power of two, the
// placement under logical_shards refines that under any smaller power of
// two: native hash partitions with MODULUS 8 on a shard of a 256-shard
// map, or a map doubled later, agree with it.
//
// Keys arrive in text form (a SQL literal's contents, a text Bind
// parameter) or in binary form (a binary Bind parameter: 2, 4 or 8-byte
// big-endian integers, 16-byte uuids, the bytes of a text). KeyType's
// HashText and HashBinary decode and hash them without allocating. A
// value the type's input function would reject is reported (ErrKeySyntax,
// ErrKeyRange, ErrKeyLength): no shard can hold it, so the router sends
// the statement to any shard and Postgres reports the genuine error. The
// text decoders accept what any supported Postgres accepts (PostgreSQL
// 16's 0x/0o/0b prefixes and '_' separators included), since refusing a
// form a server takes would misplace the key while accepting one an older
// server refuses only moves an error.
//
// The proof is integration/shard_placement_test.go: real PostgreSQL 15
// tables partitioned by hash receive 10,000 keys of each type and their
// partitions are compared with this package's placement of every key, in
// text and in binary form.
//
// # The shard file
//
// shard_file (TOML, strict) declares clusters: a database name clients
// connect to (not a [databases] entry itself), the default database for
// unsharded tables, logical_shards (a power of two), the on_missing_key
// policy, shadow mode, the users who may target a shard explicitly, and
// colocations. A colocation names a key type, its tables with their key
// columns, and the ranges of logical shards each [databases] entry holds:
//
//	[[cluster]]
//	name = "app"
//	default_database = "app_main"
//	logical_shards = 256
//	on_missing_key = "error"      # error | default | scatter
//	shadow = false
//	target_users = ["ops"]
//
//	[[cluster.colo]]
//	name = "org"
//	key_type = "bigint"           # bigint | int | smallint | text | uuid
//	tables = { files = "org_id", orgs = "id" }
//	shards = [
//	  { range = "0-127",   database = "app_s0" },
//	  { range = "128-255", database = "app_s1" },
//	]
//
// Parse checks the invariants Figma's topology checks: every colocation's
// ranges cover 0..logical_shards-1 exactly once, every database named is
// one of the [databases] entries the caller passes, a table belongs to one
// colocation of a cluster, names are unique. Unknown keys and broken
// invariants are *FileError values "file:line: key: message", the line
// being that of the value at fault (internal/tomlpos finds it). The result
// is an immutable *Map: RELOAD parses a new one and publishes it whole, so
// a transaction keeps the map it started with. Its lookups (Map.Cluster,
// Cluster.Table, Colo.Place) are a map index and an array index, without
// allocation. The user-facing description is docs/sharding.md.
//
// Two limits follow from Postgres: text keys must be hashed in the
// server's encoding (the router must not convert them to another), and
// the byte hash is that of a little-endian server (x86-64, arm64), which
// is what Postgres runs on in practice.
//
// # Routing a statement
//
// Files: lex.go (Postgres's tokens as byte ranges; keyword.go names the
// words the scanner looks for), scan.go, scan_from.go, scan_where.go and
// scan_write.go (the fast-path shapes, see Scanner), hint.go (comments
// and SET pgturnstile.*), route.go (Router: the decision), memo.go (a
// Router's last statement decided by one literal, which decides the same
// text with another literal without a scan, and why that is exact).
//
// Router.Route decides, in order: an explicit target (shard=NAME|all, for
// admins and target_users), an explicit key (a shard_key comment, else the
// session's SET or startup option), the keys the scanner finds in the
// text, the default database for a text that names no sharded table; a
// sharded table whose shard cannot be decided exactly follows
// on_missing_key, and by default is refused with the reason, the table and
// its key column for the client's 0A000. A Parse keyed by $n is Pending:
// Router.Prepare keeps which parameters decide (once per statement) and
// Prepared.Bind places them, in text or binary format. Every key of a text
// must land on one database, or it is refused.
//
// The proofs against PostgreSQL are integration/shard_pruning_test.go (the
// router's logical shard is the one partition Postgres's own planner keeps
// for the same statement on tables partitioned by hash) and
// integration/shard_corpus_test.go (the 511 statements of
// testdata/unroutable.sql, which the scanner must refuse, are valid SQL).
package shard

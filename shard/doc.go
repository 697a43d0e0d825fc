// Package shard is pgturnstile's sharding router, without the pooler: the
// shard map read from the shard file, Postgres' partition hash, and (to
// come) the key scanner, the hints and the routing decision for a
// statement (issue 34). It is pure: no sockets, no goroutines, no import
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
// Two limits follow from Postgres: text keys must be hashed in the
// server's encoding (the router must not convert them to another), and
// the byte hash is that of a little-endian server (x86-64, arm64), which
// is what Postgres runs on in practice.
package shard

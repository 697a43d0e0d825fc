package shard

import (
	"encoding/binary"
	"math/bits"
)

// Postgres' partition hash, written from the description of the C code in
// src/common/hashfn.c (hash_bytes_extended, hash_bytes_uint32_extended),
// src/include/common/hashfn.h (hash_combine64), src/backend/access/hash/
// hashfunc.c (hashint8extended, hashtextextended), src/backend/utils/adt/
// uuid.c (uuid_hash_extended) and src/backend/partitioning/partbounds.c
// (compute_partition_hash_value, get_partition_for_tuple).
//
// For a table PARTITION BY HASH (k) with partitions of MODULUS m, Postgres
// puts a row in the partition whose REMAINDER is
//
//	hash_combine64(0, H(k, HASH_PARTITION_SEED)) mod m
//
// where H is the key type's extended hash function; a NULL key contributes
// nothing, so its row hash is 0 and it lands in REMAINDER 0. The byte hash
// reads the key in little-endian words, which is what Postgres does on the
// little-endian machines it runs on today (x86-64, arm64); a big-endian
// server places text and uuid keys differently, and is not supported.

// partitionSeed is HASH_PARTITION_SEED (src/include/catalog/partition.h).
const partitionSeed uint64 = 0x7A5B22367996DCFD

// combineConst is hash_combine64's 64 bits of random data.
const combineConst uint64 = 0x49a0f4dd15e5a8e3

// jenkinsInit is the initial state of the Jenkins lookup3 hash before the
// key length is added.
const jenkinsInit uint32 = 0x9e3779b9 + 3923095

// Hash is the row hash Postgres computes for a one-column partition key
// (compute_partition_hash_value): the input of the modulus that picks the
// partition.
type Hash uint64

// NullHash is the row hash of a NULL key: Postgres skips NULL columns when
// it combines the column hashes, so the row hash stays 0.
const NullHash Hash = 0

// Logical returns the logical shard of h among m: the REMAINDER of the
// partition Postgres picks for MODULUS m. m must be positive; with a power
// of two it is a mask.
func (h Hash) Logical(m uint32) uint32 {
	if m&(m-1) == 0 {
		return uint32(uint64(h) & uint64(m-1))
	}
	return uint32(uint64(h) % uint64(m))
}

// partitionHash is compute_partition_hash_value for one non-NULL column
// whose extended hash (seeded with HASH_PARTITION_SEED) is colHash:
// hash_combine64(0, colHash), where the shifted terms of the running value
// vanish.
func partitionHash(colHash uint64) Hash {
	return Hash(colHash + combineConst)
}

// HashInt64 is the row hash of an integer key. Postgres' hashint2extended,
// hashint4extended and hashint8extended agree on equal values (cross-type
// hash joins need it), so smallint, integer and bigint keys place alike.
func HashInt64(v int64) Hash {
	// hashint8extended folds the high half into the low one: xor with the
	// high half when v >= 0, with its complement when v < 0, so that a
	// value in int4 range hashes as its int4.
	lo := uint32(v)
	hi := uint32(uint64(v) >> 32)
	if v < 0 {
		hi = ^hi
	}
	return partitionHash(hashUint32Extended(lo^hi, partitionSeed))
}

// HashBytes is the row hash of a text (or varchar) key: hashtextextended
// over the bytes in the server encoding, which is a plain byte hash under
// any deterministic collation (C, POSIX and every libc collation; only
// nondeterministic ICU collations hash a sort key instead).
func HashBytes(b []byte) Hash {
	return partitionHash(hashBytesExtended(b, partitionSeed))
}

// HashUUID is the row hash of a uuid key: uuid_hash_extended, a byte hash
// of the 16 bytes in network order.
func HashUUID(u *[16]byte) Hash {
	return partitionHash(hashBytesExtended(u[:], partitionSeed))
}

// mix and final are the two mixing steps of Bob Jenkins' lookup3.

func mix(a, b, c uint32) (uint32, uint32, uint32) {
	a -= c
	a ^= bits.RotateLeft32(c, 4)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 6)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 8)
	b += a
	a -= c
	a ^= bits.RotateLeft32(c, 16)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 19)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 4)
	b += a
	return a, b, c
}

func final(a, b, c uint32) (uint32, uint32, uint32) {
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return a, b, c
}

// seeded perturbs the initial state with a 64-bit seed, as if the seed
// were a 12-byte block (high word, low word, zero) mixed in first.
func seeded(a, b, c uint32, seed uint64) (uint32, uint32, uint32) {
	if seed == 0 {
		return a, b, c
	}
	a += uint32(seed >> 32)
	b += uint32(seed)
	return mix(a, b, c)
}

// hashUint32Extended is hash_bytes_uint32_extended: the byte hash of a
// four-byte key, taken as a number rather than as bytes (so the same on
// either byte order).
func hashUint32Extended(k uint32, seed uint64) uint64 {
	a, b, c := seeded(jenkinsInit+4, jenkinsInit+4, jenkinsInit+4, seed)
	a += k
	_, b, c = final(a, b, c)
	return uint64(b)<<32 | uint64(c)
}

// hashBytesExtended is hash_bytes_extended on a little-endian machine:
// 12-byte blocks as three little-endian words, then the tail, whose bytes
// 0-3 go to a, 4-7 to b and 8-10 to c shifted up by one byte (c's low
// byte is left to the length, which the initial state holds).
func hashBytesExtended(k []byte, seed uint64) uint64 {
	// Postgres passes the length as an int and adds it as a uint32; keys
	// are far below 4 GiB (1 GiB is the varlena limit).
	n := uint32(len(k))
	a, b, c := seeded(jenkinsInit+n, jenkinsInit+n, jenkinsInit+n, seed)
	for len(k) >= 12 {
		a += binary.LittleEndian.Uint32(k[0:4])
		b += binary.LittleEndian.Uint32(k[4:8])
		c += binary.LittleEndian.Uint32(k[8:12])
		a, b, c = mix(a, b, c)
		k = k[12:]
	}
	switch len(k) {
	case 11:
		c += uint32(k[10]) << 24
		fallthrough
	case 10:
		c += uint32(k[9]) << 16
		fallthrough
	case 9:
		c += uint32(k[8]) << 8
		fallthrough
	case 8:
		b += uint32(k[7]) << 24
		fallthrough
	case 7:
		b += uint32(k[6]) << 16
		fallthrough
	case 6:
		b += uint32(k[5]) << 8
		fallthrough
	case 5:
		b += uint32(k[4])
		fallthrough
	case 4:
		a += uint32(k[3]) << 24
		fallthrough
	case 3:
		a += uint32(k[2]) << 16
		fallthrough
	case 2:
		a += uint32(k[1]) << 8
		fallthrough
	case 1:
		a += uint32(k[0])
	}
	_, b, c = final(a, b, c)
	return uint64(b)<<32 | uint64(c)
}

package shard

import (
	"strconv"
	"testing"
)

// Column hashes from PostgreSQL 15.18 (x86-64), as
//
//	SELECT hashint8extended(k, 8816678312871386365)      -- HASH_PARTITION_SEED
//	SELECT hashtextextended(k, 8816678312871386365)      -- database collation C
//	SELECT uuid_hash_extended(k, 8816678312871386365)
//
// printed as bigint. The full 64 bits are compared, so a slip in any step
// of the Jenkins hash shows here, not only in the low bits a modulus keeps.
// The placement test against real partitions is
// integration/shard_placement_test.go.
var pgColumnHashes = []struct {
	kind string // "int", "text" or "uuid"
	key  string
	hash int64
}{
	{"int", "0", -4403592609991167795},
	{"int", "1", 5968994663651403477},
	{"int", "-1", -5017072347659237694},
	{"int", "42", 7363975540656877951},
	{"int", "-42", 6660635123915733087},
	{"int", "2147483647", -6050265599104649060},
	{"int", "-2147483648", 4938542303000433043},
	{"int", "2147483648", 4938542303000433043},
	{"int", "-2147483649", -6050265599104649060},
	{"int", "9223372036854775807", 4938542303000433043},
	{"int", "-9223372036854775808", -6050265599104649060},
	{"text", "", -5700645584453517373},
	{"text", "a", -6705225459120232837},
	{"text", "ab", 596009030900183869},
	{"text", "abc", 3628778498291917250},
	{"text", "abcd", 4029384952263848046},
	{"text", "abcde", 4809259092934399961},
	{"text", "abcdefgh", -7754745184861941070},
	{"text", "abcdefghijk", -2046435308545367432},
	{"text", "abcdefghijkl", -7876791541613377658},
	{"text", "abcdefghijklm", -6785754114725280077},
	{"text", "ü", -713069178574967820},
	{"text", "日本語", -8050275759738715173},
	{"text", "hello, world: 24 bytes!!", 3632870075556874727},
	{"uuid", "00000000-0000-0000-0000-000000000000", -5281082146396728638},
	{"uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", 424513190990560493},
	{"uuid", "ffffffff-ffff-ffff-ffff-ffffffffffff", -148986464341306210},
}

func TestColumnHashesMatchPostgres(t *testing.T) {
	for _, tc := range pgColumnHashes {
		var got Hash
		switch tc.kind {
		case "int":
			v, err := strconv.ParseInt(tc.key, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			got = HashInt64(v)
		case "text":
			got = HashBytes([]byte(tc.key))
		case "uuid":
			var u [16]byte
			if err := ParseUUID([]byte(tc.key), &u); err != nil {
				t.Fatal(err)
			}
			got = HashUUID(&u)
		}
		// The row hash of one column is its hash plus hash_combine64's
		// constant.
		if want := Hash(uint64(tc.hash) + combineConst); got != want {
			t.Errorf("%s %q: row hash %#x, want %#x (Postgres' column hash %d)", tc.kind, tc.key, uint64(got), uint64(want), tc.hash)
		}
	}
}

// TestUnseededHashesMatchPostgres covers the seed-0 branch Postgres skips
// the seed mix on: hashint8extended(42, 0) and hashtextextended('abc', 0).
func TestUnseededHashesMatchPostgres(t *testing.T) {
	if got, want := hashUint32Extended(42, 0), uint64(8010225493015854792); got != want {
		t.Errorf("int 42, seed 0: %d, want %d", got, want)
	}
	if got, want := int64(hashBytesExtended([]byte("abc"), 0)), int64(-6747756470228489321); got != want {
		t.Errorf("text abc, seed 0: %d, want %d", got, want)
	}
}

// TestLogicalPowerOfTwo: a power-of-two modulus is a mask, and the
// placement under a modulus divides that under any multiple of it, which
// is why doubling logical_shards splits every logical shard in two.
func TestLogicalPowerOfTwo(t *testing.T) {
	for i := int64(-1000); i < 1000; i++ {
		h := HashInt64(i * 7919)
		for m := uint32(1); m <= 1<<16; m <<= 1 {
			if got, want := h.Logical(m), uint32(uint64(h)%uint64(m)); got != want {
				t.Fatalf("Logical(%d) = %d, want %d", m, got, want)
			}
			if h.Logical(2*m)%m != h.Logical(m) {
				t.Fatalf("placement under %d does not refine placement under %d", 2*m, m)
			}
		}
		if got, want := h.Logical(6), uint32(uint64(h)%6); got != want {
			t.Fatalf("Logical(6) = %d, want %d", got, want)
		}
	}
	if NullHash.Logical(256) != 0 {
		t.Error("NULL must land in REMAINDER 0")
	}
}

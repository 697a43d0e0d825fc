//go:build linux

package integration

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/pgturnstile/pgturnstile/shard"
)

// TestShardPlacementMatchesPostgres checks package shard's placement of
// keys against Postgres' own: for every key type the shard file offers
// (and varchar, which hashes as text), a table PARTITION BY HASH (k) with
// MODULUS 256 and one with MODULUS 8 receives at least 10,000 keys given
// in text form, cast by Postgres' own input function; each row's partition
// (tableoid) is the truth, and its key's binary form comes from Postgres'
// send function, as a binary Bind would carry it. The package must give
// the partition's REMAINDER from both forms for every row.
func TestShardPlacementMatchesPostgres(t *testing.T) {
	needPG(t)
	const db = "sharddb"
	su := directSuperuser(t, "postgres")
	ctx := ctxT(t, 5*time.Minute)
	scratchDatabase(t, ctx, su, db, "")
	conn := directSuperuser(t, db)
	// The database's collation is C (initdb --no-locale): deterministic,
	// as text placement requires.

	r := rand.New(rand.NewPCG(34, 256))
	for _, tc := range []struct {
		column string        // the key column's SQL type
		key    shard.KeyType // how package shard reads it
		send   string        // the send functions giving binary forms
		keys   []*string     // text forms; nil is NULL
	}{
		{"bigint", shard.KeyBigint, "int8send(k)", intKeys(r, math.MinInt64, math.MaxInt64)},
		{"integer", shard.KeyInt, "int4send(k), int8send(k::int8), CASE WHEN k BETWEEN -32768 AND 32767 THEN int2send(k::int2) END", intKeys(r, math.MinInt32, math.MaxInt32)},
		{"smallint", shard.KeySmallint, "int2send(k), int4send(k::int4), int8send(k::int8)", intKeys(r, math.MinInt16, math.MaxInt16)},
		{"text", shard.KeyText, "textsend(k)", textKeys(r)},
		{"varchar", shard.KeyText, "varcharsend(k)", textKeys(r)},
		{"uuid", shard.KeyUUID, "uuid_send(k)", uuidKeys(r)},
	} {
		for _, modulus := range []uint32{256, 8} {
			t.Run(fmt.Sprintf("%s/modulus=%d", tc.column, modulus), func(t *testing.T) {
				checked := placeInPostgres(t, ctx, conn, tc.column, tc.key, tc.send, tc.keys, modulus)
				if len(tc.keys) < 10000 || checked != len(tc.keys) {
					t.Errorf("checked %d of %d keys, want all of at least 10,000", checked, len(tc.keys))
				}
			})
		}
	}
}

// placeInPostgres makes the partitioned table, inserts keys (cast from
// text by Postgres) and compares each row's partition with the package's
// placement of its key in text and binary form; it returns the number of
// rows compared.
func placeInPostgres(t *testing.T, ctx context.Context, conn *pgx.Conn, column string, key shard.KeyType, send string, keys []*string, modulus uint32) int {
	t.Helper()
	table := fmt.Sprintf("place_%s_%d", column, modulus)
	var ddl strings.Builder
	fmt.Fprintf(&ddl, "CREATE TABLE %s (id int, k %s) PARTITION BY HASH (k);\n", table, column)
	for rem := uint32(0); rem < modulus; rem++ {
		fmt.Fprintf(&ddl, "CREATE TABLE %s_r%d PARTITION OF %s FOR VALUES WITH (MODULUS %d, REMAINDER %d);\n", table, rem, table, modulus, rem)
	}
	if _, err := conn.Exec(ctx, ddl.String()); err != nil {
		t.Fatalf("creating %s: %v", table, err)
	}
	// The text forms reach Postgres as text and become keys through the
	// type's input function (an I/O cast), as a text Bind or a literal.
	if _, err := conn.Exec(ctx, fmt.Sprintf(
		"INSERT INTO %s SELECT ord, k::%s FROM unnest($1::text[]) WITH ORDINALITY AS u(k, ord)", table, column), keys); err != nil {
		t.Fatalf("inserting into %s: %v", table, err)
	}
	rows, err := conn.Query(ctx, fmt.Sprintf("SELECT id, tableoid::regclass::text, %s FROM %s ORDER BY id", send, table))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	prefix := table + "_r"
	checked, mismatches := 0, 0
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		id := int(vals[0].(int32))
		part := vals[1].(string)
		rem, err := strconv.ParseUint(strings.TrimPrefix(part, prefix), 10, 32)
		if !strings.HasPrefix(part, prefix) || err != nil {
			t.Fatalf("row %d in %q, not a partition of %s", id, part, table)
		}
		want := uint32(rem)
		text := keys[id-1]
		report := func(form string, got uint32, err error) {
			if err != nil || got != want {
				mismatches++
				if mismatches <= 20 {
					t.Errorf("%s key %s (%s form): package says logical shard %d (err %v); Postgres put it in REMAINDER %d",
						column, quoteKey(text), form, got, err, want)
				}
			}
		}
		if text == nil {
			// NULL: compute_partition_hash_value skips the column.
			report("NULL", shard.NullHash.Logical(modulus), nil)
			for i := 2; i < len(vals); i++ {
				if vals[i] != nil {
					t.Fatalf("row %d: NULL key with a binary form %v", id, vals[i])
				}
			}
			checked++
			continue
		}
		h, err := key.HashText([]byte(*text))
		report("text", h.Logical(modulus), err)
		for i := 2; i < len(vals); i++ {
			bin, ok := vals[i].([]byte)
			if !ok {
				continue // no int2 form of a wider value
			}
			h, err := key.HashBinary(bin)
			report(fmt.Sprintf("binary, %d bytes", len(bin)), h.Logical(modulus), err)
		}
		checked++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s, MODULUS %d: %d keys checked against Postgres' partitions, %d mismatches", column, modulus, checked, mismatches)
	return checked
}

func quoteKey(s *string) string {
	if s == nil {
		return "NULL"
	}
	if len(*s) > 60 {
		return strconv.Quote((*s)[:60]) + fmt.Sprintf("... (%d bytes)", len(*s))
	}
	return strconv.Quote(*s)
}

func ptr(s string) *string { return &s }

// intKeys gives 10,000 random integers in [lo, hi] spread over all
// magnitudes, the edges of every integer type that fits, NULL, and the
// text forms int8in accepts besides plain digits (blanks, '+', leading
// zeros, "-0").
func intKeys(r *rand.Rand, lo, hi int64) []*string {
	var keys []*string
	for _, v := range []int64{0, 1, -1, 2, -2, 42, -42, 255, 256, -256,
		math.MinInt16, math.MaxInt16, math.MinInt16 - 1, math.MaxInt16 + 1,
		math.MinInt32, math.MaxInt32, math.MinInt32 - 1, math.MaxInt32 + 1,
		math.MinInt64, math.MaxInt64, math.MinInt64 + 1, math.MaxInt64 - 1,
		1 << 32, -1 << 32, 1<<32 - 1, -(1<<32 - 1)} {
		if v >= lo && v <= hi {
			keys = append(keys, ptr(strconv.FormatInt(v, 10)))
		}
	}
	keys = append(keys, nil, ptr(" 42"), ptr("42 "), ptr("\t-17\n"), ptr("+7"), ptr("007"), ptr("-0"), ptr("+0"), ptr(" -000123 "))
	for range 10000 {
		// A random bit length, so small and large magnitudes both occur.
		v := int64(r.Uint64() >> r.IntN(64))
		if r.IntN(2) == 0 {
			v = -v
		}
		if v < lo || v > hi {
			v = lo + int64(uint64(v)%(uint64(hi-lo)+1))
		}
		keys = append(keys, ptr(strconv.FormatInt(v, 10)))
	}
	return keys
}

// textKeys gives 10,000 strings: the empty one, every length from 1 to 40 bytes (all
// tails of the 12-byte blocks the hash reads), ASCII and multi-byte UTF-8
// (2, 3 and 4-byte sequences), blanks, long strings past the TOAST
// threshold, and NULL.
func textKeys(r *rand.Rand) []*string {
	keys := []*string{ptr(""), nil, ptr(" "), ptr("a"), ptr("ü"), ptr("日本語"), ptr("😀"), ptr("naïve café"),
		ptr("Ελληνικά"), ptr("x\u00a0y"), ptr(strings.Repeat("a", 12)), ptr(strings.Repeat("b", 13)),
		ptr(strings.Repeat("long ", 2000)), ptr(strings.Repeat("日本", 3000))}
	alphabets := [][]rune{
		[]rune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_ .'\\\""),
		[]rune("äöüßéèêçñøåÆŒœ€£¥§©®°±µ¶·"),
		[]rune("日本語中文한국어ひらがなカタカナ"),
		[]rune("😀🎉🚀🧪𝔘𝔫𝔦𝔠𝔬𝔡𝔢"),
	}
	for i := range 10000 {
		n := i % 41
		if i%97 == 0 {
			n = 100 + r.IntN(3000)
		}
		var b strings.Builder
		for b.Len() < n {
			a := alphabets[r.IntN(len(alphabets))]
			if r.IntN(4) != 0 {
				a = alphabets[0]
			}
			b.WriteRune(a[r.IntN(len(a))])
		}
		s := b.String()
		if !utf8.ValidString(s) {
			panic("invalid UTF-8 key")
		}
		keys = append(keys, &s)
	}
	return keys
}

// uuidKeys gives 10,000 random uuids in every text layout uuid_in accepts
// (canonical, upper case, braces, no hyphens, a hyphen after every four
// digits), the nil and max uuids, and NULL.
func uuidKeys(r *rand.Rand) []*string {
	keys := []*string{ptr("00000000-0000-0000-0000-000000000000"), ptr("ffffffff-ffff-ffff-ffff-ffffffffffff"), nil}
	for i := range 10000 {
		var u [16]byte
		for j := range u {
			u[j] = byte(r.Uint32())
		}
		hex := fmt.Sprintf("%x", u[:])
		var s string
		switch i % 5 {
		case 0, 1:
			s = hex[:8] + "-" + hex[8:12] + "-" + hex[12:16] + "-" + hex[16:20] + "-" + hex[20:]
		case 2:
			s = "{" + strings.ToUpper(hex[:8]+"-"+hex[8:12]+"-"+hex[12:16]+"-"+hex[16:20]+"-"+hex[20:]) + "}"
		case 3:
			s = hex
		case 4:
			var b strings.Builder
			for g := 0; g < 32; g += 4 {
				if g > 0 && r.IntN(2) == 0 {
					b.WriteByte('-')
				}
				b.WriteString(hex[g : g+4])
			}
			s = b.String()
		}
		keys = append(keys, &s)
	}
	return keys
}

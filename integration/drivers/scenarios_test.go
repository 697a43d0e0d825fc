//go:build linux

package drivers

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// The scenarios every driver runs, with the lines a correct run prints. The
// programs in node/, python/ and java/ implement the same scenarios; these
// constants are repeated there.

// prepared: each client c (1..numClients) runs txnsPerClient transactions
//
//	BEGIN; <prepSelectSQL>(c, seq) → (c, seq); <prepInsertSQL>(c, seq); COMMIT
//
// then one client prints prepared's line from prepCheckSQL.
const (
	prepSelectSQL = "SELECT $1::int AS client, $2::int AS seq"
	prepInsertSQL = "INSERT INTO prep_log (client, seq) VALUES ($1, $2)"
	prepCheckSQL  = "SELECT count(*), count(DISTINCT (client, seq)), sum(client * 1000 + seq) FROM prep_log"
)

// pipeline: each client sends one pipeline of pipelineLength statements,
// alternately pipeInsertSQL(c, i, "c<c>-<i>") and pipeSelectSQL(c, i), which
// must return that v; ok counts the selects that did.
const (
	pipeInsertSQL = "INSERT INTO pipe_t (client, i, v) VALUES ($1, $2, $3)"
	pipeSelectSQL = "SELECT v FROM pipe_t WHERE client = $1 AND i = $2"
	pipeCheckSQL  = "SELECT count(*) FROM pipe_t"
)

// error: each client, errorRounds times:
//
//	BEGIN; INSERT INTO err_t VALUES (c); SELECT tagged_fail(c) → P0001 "client c failed";
//	SELECT 1 → 25P02; ROLLBACK; SELECT count(*) FROM err_t WHERE client = c → 0
const (
	errInsertSQL = "INSERT INTO err_t (client) VALUES ($1)"
	errFailSQL   = "SELECT tagged_fail($1)"
	errCheckSQL  = "SELECT count(*) FROM err_t WHERE client = $1"
)

// rows: the driver hashes "<g>|<md5>\n" for every row, in order.
const rowsSQL = "SELECT g, md5(g::text) FROM generate_series(1, 100000) AS g"

// types: the driver sends typesText, typesBytea (bytes 0..255), typesNumeric
// and typesTimestamptz as parameters in the driver's own types, checks that
// the first four columns come back equal to what it sent, and prints the
// server's view of them (columns 5-9).
const (
	typesSQL = "SELECT $1::text, $2::bytea, $3::numeric, $4::timestamptz, " +
		"md5($1::text), char_length($1::text), md5($2::bytea), $3::numeric::text, $4::timestamptz::text"
	typesText        = "h\u00e9llo w\u00f6rld \u2603 \u65e5\u672c\u8a9e \U0001F600 e\u0301 \u05e2\u05d1\u05e8\u05d9\u05ea\ttab\\back'q\"\n"
	typesNumeric     = "-12345678901234567890.123456789012345678901234567890"
	typesTimestamptz = "2024-02-29 23:59:59.123456+00"
)

func typesBytea() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func typesTime() time.Time {
	return time.Date(2024, 2, 29, 23, 59, 59, 123456000, time.UTC)
}

// canonical holds the line each shared scenario must print, whatever the
// driver.
var canonical = map[string]string{
	"prepared": line("prepared", "clients", numClients, "txns", numClients*txnsPerClient,
		"ok", numClients*txnsPerClient, "rows", numClients*txnsPerClient, "distinct", numClients*txnsPerClient,
		"sum", prepSum()),
	"pipeline": line("pipeline", "clients", numClients, "statements", pipelineLength,
		"ok", numClients*pipelineLength/2, "rows", numClients*pipelineLength/2),
	"error": line("error", "clients", numClients, "rounds", errorRounds, "first", "P0001",
		"own_message", numClients*errorRounds, "next", "25P02", "rolled_back", numClients*errorRounds),
	"rows":  rowsLine(),
	"types": typesLine(),
}

func prepSum() int {
	s := 0
	for c := 1; c <= numClients; c++ {
		for q := 1; q <= txnsPerClient; q++ {
			s += c*1000 + q
		}
	}
	return s
}

func rowsLine() string {
	h := sha256.New()
	for g := 1; g <= bigRows; g++ {
		m := md5.Sum([]byte(strconv.Itoa(g)))
		fmt.Fprintf(h, "%d|%s\n", g, hex.EncodeToString(m[:]))
	}
	return line("rows", "n", bigRows, "sha256", hex.EncodeToString(h.Sum(nil)[:8]))
}

func typesLine() string {
	tm := md5.Sum([]byte(typesText))
	bm := md5.Sum(typesBytea())
	return fmt.Sprintf("types text_md5=%s chars=%d bytea_md5=%s numeric=%s timestamptz=%s roundtrip=true",
		hex.EncodeToString(tm[:]), utf8.RuneCountInString(typesText), hex.EncodeToString(bm[:]), typesNumeric, typesTimestamptz)
}

// typesResult formats the server's columns 5-9 of typesSQL.
func typesResult(textMD5 string, chars int, byteaMD5, numeric, ts string, roundtrip bool) string {
	return fmt.Sprintf("types text_md5=%s chars=%d bytea_md5=%s numeric=%s timestamptz=%s roundtrip=%v",
		textMD5, chars, byteaMD5, numeric, ts, roundtrip)
}

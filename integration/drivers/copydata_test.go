//go:build linux

package drivers

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// copyRow is one row of copy_t (id, t, n, b, ts). t is NULL (tNull) on every
// 97th row.
type copyRow struct {
	id    int32
	t     string
	tNull bool
	n     string // numeric, in PostgreSQL's text form
	b     []byte
	ts    time.Time
}

// copyRowAt is row i of the copy data: text with multibyte characters and
// every character COPY's text format escapes, numerics of several scales and
// signs, bytea with NUL and high bytes, timestamptz with and without
// fractions.
func copyRowAt(i int) copyRow {
	r := copyRow{id: int32(i)}
	r.t = fmt.Sprintf("row %d: héllo wörld ☃ 日本語 😀 Ω\ttab\nnewline\\backslash\r'q\"", i)
	r.tNull = i%97 == 0
	whole := (i*7919)%1000003 - 500000
	switch i % 3 {
	case 0:
		r.n = fmt.Sprintf("%d.%06d", whole, i%1000000)
	case 1:
		r.n = fmt.Sprintf("%d", whole)
	default:
		r.n = fmt.Sprintf("%d.%d", whole, i%10)
	}
	r.b = []byte{byte(i), byte(i >> 8), 0, 0xff, '\\', byte(i >> 16), '\n'}
	r.ts = time.Unix(1_700_000_000+int64(i)*37, int64(i%7)*123_456_000).UTC()
	if i%5 == 0 {
		r.ts = r.ts.Truncate(time.Second)
	}
	return r
}

// copyText renders the row in COPY's text format, exactly as PostgreSQL
// prints it with TimeZone=UTC (so COPY TO gives back the same bytes).
func (r copyRow) copyText(sb *strings.Builder) {
	fmt.Fprintf(sb, "%d\t", r.id)
	if r.tNull {
		sb.WriteString(`\N`)
	} else {
		sb.WriteString(copyEscape(r.t))
	}
	sb.WriteString("\t" + r.n + "\t")
	sb.WriteString(`\\x` + hex.EncodeToString(r.b))
	sb.WriteString("\t" + pgTimestamptz(r.ts) + "\n")
}

// pgTimestamptz is PostgreSQL's ISO output of a timestamptz in UTC: trailing
// zeros of the fraction dropped, offset "+00".
func pgTimestamptz(ts time.Time) string {
	return ts.UTC().Format("2006-01-02 15:04:05.999999") + "+00"
}

func copyEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\t", `\t`, "\n", `\n`, "\r", `\r`).Replace(s)
}

var (
	copyOnce  sync.Once
	copyPath  string
	copyBytes []byte
)

// copyFile writes the copy data (bigRows rows) once and returns its path.
// Every driver copies it in and must get exactly these bytes back from
// COPY (SELECT * FROM copy_t ORDER BY id) TO STDOUT.
func copyFile() string {
	copyOnce.Do(func() {
		var sb strings.Builder
		for i := 1; i <= bigRows; i++ {
			copyRowAt(i).copyText(&sb)
		}
		copyBytes = []byte(sb.String())
		copyPath = filepath.Join(pg.dir, "copy.txt")
		if err := os.WriteFile(copyPath, copyBytes, 0o644); err != nil {
			panic(err)
		}
	})
	return copyPath
}

// binaryCopyRows is how many rows pgx.CopyFrom copies (binary COPY): its
// encoder is slow under -race, and the text COPY already moves 100,000.
const binaryCopyRows = 20_000

// copyResult is the line every driver prints for a COPY round trip.
func copyResult(scenario string, got []byte) string {
	return copyResultN(scenario, got, bigRows)
}

// copyResultN is copyResult for a copy of the first n rows of the file.
func copyResultN(scenario string, got []byte, n int) string {
	copyFile()
	want := copyBytes
	for i, end := 0, 0; i < n; i++ {
		end += bytes.IndexByte(copyBytes[end:], '\n') + 1
		want = copyBytes[:end]
	}
	sum := sha256.Sum256(got)
	return line(scenario, "rows", bytes.Count(got, []byte("\n")), "bytes", len(got),
		"sha256", hex.EncodeToString(sum[:8]), "exact", bytes.Equal(got, want))
}

// copyOutSQL is the query every driver copies out with.
const copyOutSQL = "COPY (SELECT * FROM copy_t ORDER BY id) TO STDOUT"

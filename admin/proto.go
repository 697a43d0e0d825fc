package admin

import (
	"encoding/binary"
	"strconv"

	"github.com/pgturnstile/pgturnstile/wire"
)

// Type OIDs of the result columns, as PgBouncer's pktbuf_write_RowDescription
// assigns them: 's' and 'T' (times, printed as text) are text, 'i' int4,
// 'q' int8, 'N' numeric (the statistics since 1.12), 'b' bytea.
const (
	oidBytea   uint32 = 17
	oidInt8    uint32 = 20
	oidInt4    uint32 = 23
	oidText    uint32 = 25
	oidNumeric uint32 = 1700
)

// column is one field of a RowDescription.
type column struct {
	name string
	oid  uint32
}

// typeSize is the typlen PgBouncer sends for each type.
func typeSize(oid uint32) int16 {
	switch oid {
	case oidInt4:
		return 4
	case oidInt8:
		return 8
	}
	return -1
}

// cols builds a column list from PgBouncer's tuple descriptor letters
// (s text, T time as text, i int4, q int8, N numeric, b bytea), so each SHOW
// reads like its C counterpart.
func cols(desc string, names ...string) []column {
	if len(desc) != len(names) {
		panic("BUG: admin: descriptor " + desc + " does not match " + strconv.Itoa(len(names)) + " names")
	}
	out := make([]column, len(names))
	for i, n := range names {
		var oid uint32
		switch desc[i] {
		case 's', 'T':
			oid = oidText
		case 'i':
			oid = oidInt4
		case 'q':
			oid = oidInt8
		case 'N':
			oid = oidNumeric
		case 'b':
			oid = oidBytea
		default:
			panic("BUG: admin: bad descriptor letter in " + desc)
		}
		out[i] = column{n, oid}
	}
	return out
}

// value is one cell of a DataRow; null prints as SQL NULL.
type value struct {
	s    string
	null bool
}

var null = value{null: true}

func text(s string) value { return value{s: s} }

func num[T ~int | ~int64 | ~uint64 | ~int32](n T) value {
	if n < 0 {
		return value{s: strconv.FormatInt(int64(n), 10)}
	}
	return value{s: strconv.FormatUint(uint64(n), 10)}
}

func boolValue(b bool) value {
	if b {
		return text("1")
	}
	return text("0")
}

// textOrNull is NULL for "", as PgBouncer prints unset strings.
func textOrNull(s string) value {
	if s == "" {
		return null
	}
	return text(s)
}

func appendHeader(dst []byte, typ byte) ([]byte, int) {
	return append(dst, typ, 0, 0, 0, 0), len(dst)
}

func finish(dst []byte, start int) []byte {
	binary.BigEndian.PutUint32(dst[start+1:], uint32(len(dst)-start-1))
	return dst
}

// appendRowDescription encodes a RowDescription ('T') in text format.
func appendRowDescription(dst []byte, cs []column) []byte {
	dst, start := appendHeader(dst, 'T')
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(cs)))
	for _, c := range cs {
		dst = append(dst, c.name...)
		dst = append(dst, 0)
		dst = binary.BigEndian.AppendUint32(dst, 0) // table OID
		dst = binary.BigEndian.AppendUint16(dst, 0) // column number
		dst = binary.BigEndian.AppendUint32(dst, c.oid)
		dst = binary.BigEndian.AppendUint16(dst, uint16(typeSize(c.oid)))
		dst = binary.BigEndian.AppendUint32(dst, 0xFFFFFFFF) // typmod -1
		dst = binary.BigEndian.AppendUint16(dst, 0)          // text format
	}
	return finish(dst, start)
}

// appendDataRow encodes a DataRow ('D').
func appendDataRow(dst []byte, vs []value) []byte {
	dst, start := appendHeader(dst, 'D')
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(vs)))
	for _, v := range vs {
		if v.null {
			dst = binary.BigEndian.AppendUint32(dst, 0xFFFFFFFF)
			continue
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(v.s)))
		dst = append(dst, v.s...)
	}
	return finish(dst, start)
}

// appendCommandComplete encodes CommandComplete ('C') with tag.
func appendCommandComplete(dst []byte, tag string) []byte {
	dst, start := appendHeader(dst, wire.MsgCommandComplete)
	dst = append(dst, tag...)
	dst = append(dst, 0)
	return finish(dst, start)
}

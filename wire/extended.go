package wire

import (
	"bytes"
	"encoding/binary"
)

// Codecs of the extended-query protocol, for the messages the pooler looks
// inside (Parse, Bind, Describe, Close from a client; DataRow from a
// server) and the ones it writes to servers itself (statements it
// prepares under its own names, the rewrites that carry them, the
// auth_query lookup). Decoders never read past the body they are given
// and report a malformed one with ok=false; what they return are slices
// of that body, so they allocate nothing.

// Describe and Close name either a prepared statement or a portal.
const (
	TargetStatement byte = 'S'
	TargetPortal    byte = 'P'
)

// AppendHeader appends the five-byte header of a message of type typ whose
// body of bodyLen bytes the caller writes after it (a body kept as it was
// received, written by reference).
func AppendHeader(dst []byte, typ byte, bodyLen int) []byte {
	dst = append(dst, typ)
	return binary.BigEndian.AppendUint32(dst, uint32(4+bodyLen))
}

// AppendParse encodes Parse. types is the raw parameter-type section as
// DecodeParse returns it (Int16 count, then an Int32 OID each); empty means
// no declared types.
func AppendParse(dst []byte, name, query string, types []byte) []byte {
	dst = AppendParseHead(dst, name, len(query), types)
	dst = append(dst, query...)
	return AppendParseTail(dst, types)
}

// AppendParseHead and AppendParseTail encode a Parse around a query text
// of queryLen bytes that the caller puts between them: appended in place,
// or written separately so that a long statement text reaches the server
// without being copied into the message. The length written by
// AppendParseHead counts the query and the tail.
func AppendParseHead(dst []byte, name string, queryLen int, types []byte) []byte {
	dst = AppendHeader(dst, MsgParse, len(name)+1+queryLen+1+typesLen(types))
	dst = append(dst, name...)
	return append(dst, 0)
}

// AppendParseTail ends a Parse begun with AppendParseHead, after its query.
func AppendParseTail(dst []byte, types []byte) []byte {
	dst = append(dst, 0)
	if len(types) == 0 {
		return append(dst, 0, 0)
	}
	return append(dst, types...)
}

func typesLen(types []byte) int {
	if len(types) == 0 {
		return 2
	}
	return len(types)
}

// DecodeParse splits a Parse body into the statement name, the query text
// and the raw parameter-type section (nil when it declares none), all
// slices of body. ok is false unless body is exactly a name, a query and a
// type section whose count matches its length.
func DecodeParse(body []byte) (name, query, types []byte, ok bool) {
	name, n, ok := cut(body)
	if !ok {
		return nil, nil, nil, false
	}
	query, m, ok := cut(body[n:])
	if !ok {
		return nil, nil, nil, false
	}
	types = body[n+m:]
	if len(types) < 2 {
		return nil, nil, nil, false
	}
	count := int(binary.BigEndian.Uint16(types))
	if len(types) != 2+4*count {
		return nil, nil, nil, false
	}
	if count == 0 {
		types = nil
	}
	return name, query, types, true
}

// AppendBind encodes a Bind of statement stmt to portal with params as
// text-format values (none NULL) and every result column in text format.
// The protocol counts parameters in an Int16: more than 65535 is a bug.
func AppendBind(dst []byte, portal, stmt string, params []string) []byte {
	if len(params) > 0xffff {
		panic("BUG: wire: a Bind of more than 65535 parameters")
	}
	n := len(portal) + 1 + len(stmt) + 1 + 2 + 2 + 2
	for _, p := range params {
		n += 4 + len(p)
	}
	dst = AppendHeader(dst, MsgBind, n)
	dst = append(dst, portal...)
	dst = append(dst, 0)
	dst = append(dst, stmt...)
	dst = append(dst, 0, 0, 0) // no parameter format codes: all text
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(params)))
	for _, p := range params {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(p)))
		dst = append(dst, p...)
	}
	return append(dst, 0, 0) // no result format codes: all text
}

// AppendBindHead encodes the start of a Bind, the portal and statement
// names, for a Bind whose other restLen bytes (formats, parameters, result
// formats) the caller forwards from a client's Bind as they are; the
// length written counts them. It renames the statement of a client's Bind
// without holding its parameters. portal is bytes because it comes from
// DecodeBindHead: a string would cost a copy per Bind.
func AppendBindHead(dst []byte, portal []byte, stmt string, restLen int) []byte {
	dst = AppendHeader(dst, MsgBind, len(portal)+1+len(stmt)+1+restLen)
	dst = append(dst, portal...)
	dst = append(dst, 0)
	dst = append(dst, stmt...)
	return append(dst, 0)
}

// DecodeBindHead reads the portal and statement names at the start of a
// Bind body, or of a prefix of it (the parameters may be long, and the
// pooler peeks only at the start). n is the offset after the statement
// name's NUL, where the formats begin. ok is false when either name is
// not NUL-terminated within b.
func DecodeBindHead(b []byte) (portal, stmt []byte, n int, ok bool) {
	portal, n1, ok := cut(b)
	if !ok {
		return nil, nil, 0, false
	}
	stmt, n2, ok := cut(b[n1:])
	if !ok {
		return nil, nil, 0, false
	}
	return portal, stmt, n1 + n2, true
}

// BindParam reads parameter i (0-based) of a Bind body: its bytes, whether
// it is in binary format, whether it is NULL. ok is false when the Bind has
// fewer parameters or does not read as one (Postgres then refuses it).
// It walks the body each time: a router reads one or two parameters.
func BindParam(body []byte, i int) (value []byte, binaryFormat, null, ok bool) {
	_, _, n, ok := DecodeBindHead(body)
	if !ok {
		return nil, false, false, false
	}
	rest := body[n:]
	if len(rest) < 2 {
		return nil, false, false, false
	}
	nfmt := int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if len(rest) < 2*nfmt+2 {
		return nil, false, false, false
	}
	fmts := rest[:2*nfmt]
	rest = rest[2*nfmt:]
	nparams := int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if i < 0 || i >= nparams {
		return nil, false, false, false
	}
	switch {
	case nfmt == 1:
		binaryFormat = binary.BigEndian.Uint16(fmts) == 1
	case nfmt > i:
		binaryFormat = binary.BigEndian.Uint16(fmts[2*i:]) == 1
	}
	for j := 0; ; j++ {
		if len(rest) < 4 {
			return nil, false, false, false
		}
		vlen := int32(binary.BigEndian.Uint32(rest))
		rest = rest[4:]
		if vlen < 0 {
			if j == i {
				return nil, binaryFormat, true, true
			}
			continue
		}
		if int(vlen) > len(rest) {
			return nil, false, false, false
		}
		if j == i {
			return rest[:vlen], binaryFormat, false, true
		}
		rest = rest[vlen:]
	}
}

// AppendDescribe encodes Describe of the statement or portal (target is
// TargetStatement or TargetPortal) name.
func AppendDescribe(dst []byte, target byte, name string) []byte {
	return appendTargeted(dst, MsgDescribe, target, name)
}

// AppendClose encodes Close of the statement or portal (target is
// TargetStatement or TargetPortal) name.
func AppendClose(dst []byte, target byte, name string) []byte {
	return appendTargeted(dst, MsgClose, target, name)
}

func appendTargeted(dst []byte, typ, target byte, name string) []byte {
	dst = AppendHeader(dst, typ, 1+len(name)+1)
	dst = append(dst, target)
	dst = append(dst, name...)
	return append(dst, 0)
}

// DecodeTarget reads the body of a Describe or Close: whether it names a
// statement or a portal (target, whatever byte the client sent) and the
// name, a slice of body. ok is false when body has no target byte and
// NUL-terminated name. Bytes after the name's NUL are not examined.
func DecodeTarget(body []byte) (target byte, name []byte, ok bool) {
	if len(body) < 2 {
		return 0, nil, false
	}
	name, _, ok = cut(body[1:])
	if !ok {
		return 0, nil, false
	}
	return body[0], name, true
}

// DecodeExecute returns the portal an Execute body names, a slice of
// body; ok is false when the name is not NUL-terminated.
func DecodeExecute(body []byte) (portal []byte, ok bool) {
	portal, _, ok = cut(body)
	return portal, ok
}

// AppendExecute encodes Execute of portal, returning at most maxRows rows
// (0: all).
func AppendExecute(dst []byte, portal string, maxRows uint32) []byte {
	dst = AppendHeader(dst, MsgExecute, len(portal)+1+4)
	dst = append(dst, portal...)
	dst = append(dst, 0)
	return binary.BigEndian.AppendUint32(dst, maxRows)
}

// AppendCopyFail encodes CopyFail with an error message for the server's
// error report.
func AppendCopyFail(dst []byte, msg string) []byte {
	dst = AppendHeader(dst, MsgCopyFail, len(msg)+1)
	dst = append(dst, msg...)
	return append(dst, 0)
}

// DataRow reads the columns of a DataRow body one at a time, as slices of
// the body: no allocation per row or column. Its zero value has no
// columns.
type DataRow struct {
	rest []byte // the columns not yet read
	left int    // how many the row still claims
}

// DecodeDataRow starts reading a DataRow body. ok is false when the body
// is too short to hold its column count.
func DecodeDataRow(body []byte) (row DataRow, ok bool) {
	if len(body) < 2 {
		return DataRow{}, false
	}
	return DataRow{rest: body[2:], left: int(binary.BigEndian.Uint16(body))}, true
}

// Len reports the number of columns not yet read.
func (r *DataRow) Len() int { return r.left }

// Next returns the next column's value, or null for a NULL. ok is false
// when no column is left or the next one runs past the body, after which
// the row has no more columns.
func (r *DataRow) Next() (value []byte, null, ok bool) {
	if r.left <= 0 || len(r.rest) < 4 {
		*r = DataRow{}
		return nil, false, false
	}
	l := int32(binary.BigEndian.Uint32(r.rest))
	p := r.rest[4:]
	if l < 0 {
		// -1 is NULL; Postgres sends no other negative length, and a
		// client library reads any as NULL too.
		r.rest, r.left = p, r.left-1
		return nil, true, true
	}
	if int(l) > len(p) {
		*r = DataRow{}
		return nil, false, false
	}
	r.rest, r.left = p[l:], r.left-1
	return p[:l:l], false, true
}

// cut returns the NUL-terminated string at the start of b, without its NUL,
// and the offset after the NUL.
func cut(b []byte) (s []byte, n int, ok bool) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return nil, 0, false
	}
	return b[:i:i], i + 1, true
}

// SameColumns reports whether two RowDescription messages (whole, header
// included) describe the same columns as a client reads them: names, type
// OIDs, sizes, modifiers and formats alike. The source table's OID and
// column number may differ (the same table in two databases has two
// OIDs), and so may a type OID that is not built in (an enum or domain
// made in each database); a built-in type's OID may not. Anything that
// does not read as a RowDescription is not the same.
func SameColumns(a, b []byte) bool {
	if len(a) != len(b) || len(a) < 7 || a[0] != MsgRowDescription || b[0] != MsgRowDescription {
		return false
	}
	n := int(binary.BigEndian.Uint16(a[5:7]))
	if int(binary.BigEndian.Uint16(b[5:7])) != n {
		return false
	}
	pa, pb := 7, 7
	for range n {
		na := bytes.IndexByte(a[pa:], 0)
		nb := bytes.IndexByte(b[pb:], 0)
		if na < 0 || na != nb || !bytes.Equal(a[pa:pa+na], b[pb:pb+nb]) {
			return false
		}
		pa, pb = pa+na+1, pb+nb+1
		if len(a)-pa < 18 || len(b)-pb < 18 {
			return false
		}
		// Table OID (4) and column number (2): not compared.
		ta := binary.BigEndian.Uint32(a[pa+6:])
		tb := binary.BigEndian.Uint32(b[pb+6:])
		if ta != tb && (ta < firstNormalOID || tb < firstNormalOID) {
			return false
		}
		// Type size (2), modifier (4), format (2).
		if !bytes.Equal(a[pa+10:pa+18], b[pb+10:pb+18]) {
			return false
		}
		pa, pb = pa+18, pb+18
	}
	return pa == len(a) && pb == len(b)
}

// firstNormalOID is PostgreSQL's FirstNormalObjectId: OIDs below it are
// the built-in objects', the same in every database.
const firstNormalOID = 16384

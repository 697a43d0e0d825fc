package wire

import (
	"bytes"
	"encoding/binary"
	"slices"
)

// Frontend (client → pooler) message types the pooler looks at.
const (
	MsgQuery        byte = 'Q'
	MsgParse        byte = 'P'
	MsgBind         byte = 'B'
	MsgDescribe     byte = 'D'
	MsgExecute      byte = 'E'
	MsgClose        byte = 'C'
	MsgSync         byte = 'S'
	MsgFlush        byte = 'H'
	MsgFunctionCall byte = 'F'
	MsgTerminate    byte = 'X'
	MsgCopyData     byte = 'd'
	MsgCopyDone     byte = 'c'
	MsgCopyFail     byte = 'f'
	MsgPassword     byte = 'p'
)

// Backend (server → pooler) message types: all of protocol 3.0's, so that
// BackendType can name any of them; the pooler looks at some.
const (
	MsgReadyForQuery        byte = 'Z'
	MsgErrorResponse        byte = 'E'
	MsgNoticeResponse       byte = 'N'
	MsgParameterStatus      byte = 'S'
	MsgBackendKeyData       byte = 'K'
	MsgCommandComplete      byte = 'C'
	MsgCopyInResponse       byte = 'G'
	MsgCopyOutResponse      byte = 'H'
	MsgCopyBothResponse     byte = 'W'
	MsgAuthentication       byte = 'R'
	MsgNegotiateProtocol    byte = 'v'
	MsgEmptyQueryResponse   byte = 'I'
	MsgParseComplete        byte = '1'
	MsgBindComplete         byte = '2'
	MsgCloseComplete        byte = '3'
	MsgNoData               byte = 'n'
	MsgRowDescription       byte = 'T'
	MsgDataRow              byte = 'D'
	MsgParameterDescription byte = 't'
	MsgFunctionCallResponse byte = 'V'
	MsgNotificationResponse byte = 'A'
	MsgPortalSuspended      byte = 's'
)

// Transaction status bytes of ReadyForQuery.
const (
	TxIdle    byte = 'I'
	TxInBlock byte = 'T'
	TxFailed  byte = 'E'
)

// ReadyForQueryStatus decodes a ReadyForQuery body.
func ReadyForQueryStatus(body []byte) (byte, error) {
	if len(body) != 1 {
		return 0, errShort
	}
	return body[0], nil
}

// ParseParameterStatus decodes a ParameterStatus body. The returned slices
// alias body.
func ParseParameterStatus(body []byte) (name, value []byte, err error) {
	i := bytes.IndexByte(body, 0)
	if i < 0 {
		return nil, nil, errShort
	}
	j := bytes.IndexByte(body[i+1:], 0)
	if j < 0 {
		return nil, nil, errShort
	}
	return body[:i], body[i+1 : i+1+j], nil
}

// ErrorFields holds the ErrorResponse/NoticeResponse fields the pooler uses.
type ErrorFields struct {
	Severity, Code, Message, Detail, Hint string
	// Routine is the source routine that raised it (R), which
	// lc_messages does not translate.
	Routine string
}

// ParseErrorResponse decodes an ErrorResponse or NoticeResponse body.
func ParseErrorResponse(body []byte) (ErrorFields, error) {
	var f ErrorFields
	unlocalized := false // a V field was seen
	for len(body) > 0 {
		t := body[0]
		if t == 0 {
			return f, nil
		}
		i := bytes.IndexByte(body[1:], 0)
		if i < 0 {
			return f, errShort
		}
		v := body[1 : 1+i]
		switch t {
		case 'S':
			// The localized severity; V, when present, wins whatever the
			// field order.
			if !unlocalized {
				f.Severity = string(v)
			}
		case 'V':
			f.Severity = string(v)
			unlocalized = true
		case 'C':
			f.Code = string(v)
		case 'M':
			f.Message = string(v)
		case 'D':
			f.Detail = string(v)
		case 'H':
			f.Hint = string(v)
		case 'R':
			f.Routine = string(v)
		}
		body = body[2+i:]
	}
	return f, errShort
}

// CommandTag returns the tag of a CommandComplete body without its NUL.
func CommandTag(body []byte) []byte {
	if i := bytes.IndexByte(body, 0); i >= 0 {
		return body[:i]
	}
	return body
}

func appendHeader(dst []byte, typ byte) ([]byte, int) {
	start := len(dst)
	return append(dst, typ, 0, 0, 0, 0), start
}

func finish(dst []byte, start int) []byte {
	binary.BigEndian.PutUint32(dst[start+1:], uint32(len(dst)-start-1))
	return dst
}

// AppendErrorResponse encodes an ErrorResponse (or NoticeResponse when typ is
// 'N') with severity, SQLSTATE code and message; detail and hint are optional.
func AppendErrorResponse(dst []byte, typ byte, severity, code, message, detail, hint string) []byte {
	dst, start := appendHeader(dst, typ)
	field := func(t byte, v string) {
		dst = append(dst, t)
		dst = append(dst, v...)
		dst = append(dst, 0)
	}
	field('S', severity)
	field('V', severity)
	field('C', code)
	field('M', message)
	if detail != "" {
		field('D', detail)
	}
	if hint != "" {
		field('H', hint)
	}
	dst = append(dst, 0)
	return finish(dst, start)
}

// AppendCommandComplete encodes CommandComplete with the given tag.
func AppendCommandComplete(dst []byte, tag string) []byte {
	dst, start := appendHeader(dst, MsgCommandComplete)
	dst = append(dst, tag...)
	dst = append(dst, 0)
	return finish(dst, start)
}

// AppendReadyForQuery encodes ReadyForQuery with the given status.
func AppendReadyForQuery(dst []byte, status byte) []byte {
	return append(dst, MsgReadyForQuery, 0, 0, 0, 5, status)
}

// AppendAuthenticationOk encodes AuthenticationOk.
func AppendAuthenticationOk(dst []byte) []byte {
	return append(dst, MsgAuthentication, 0, 0, 0, 8, 0, 0, 0, 0)
}

// AppendParameterStatus encodes ParameterStatus.
func AppendParameterStatus(dst []byte, name, value string) []byte {
	dst, start := appendHeader(dst, MsgParameterStatus)
	dst = append(dst, name...)
	dst = append(dst, 0)
	dst = append(dst, value...)
	dst = append(dst, 0)
	return finish(dst, start)
}

// AppendBackendKeyData encodes BackendKeyData with an 8-byte key.
func AppendBackendKeyData(dst []byte, key [8]byte) []byte {
	dst = append(dst, MsgBackendKeyData, 0, 0, 0, 12)
	return append(dst, key[:]...)
}

// AppendQuery encodes a simple Query.
func AppendQuery(dst []byte, sql string) []byte {
	dst, start := appendHeader(dst, MsgQuery)
	dst = append(dst, sql...)
	dst = append(dst, 0)
	return finish(dst, start)
}

// AppendSync encodes Sync.
func AppendSync(dst []byte) []byte { return append(dst, MsgSync, 0, 0, 0, 4) }

// AppendTerminate encodes Terminate.
func AppendTerminate(dst []byte) []byte { return append(dst, MsgTerminate, 0, 0, 0, 4) }

// AppendNegotiateProtocolVersion tells a client the newest minor version we
// speak (0) and which protocol options (_pq_.*) we did not recognise.
func AppendNegotiateProtocolVersion(dst []byte, minor uint32, unrecognized []string) []byte {
	dst, start := appendHeader(dst, MsgNegotiateProtocol)
	dst = binary.BigEndian.AppendUint32(dst, minor)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(unrecognized)))
	for _, o := range unrecognized {
		dst = append(dst, o...)
		dst = append(dst, 0)
	}
	return finish(dst, start)
}

// AppendNotice appends a NoticeResponse with PgBouncer's fields for its
// own notices: severity NOTICE, SQLSTATE 00000, the message.
func AppendNotice(out []byte, msg string) []byte {
	return AppendErrorResponse(out, MsgNoticeResponse, "NOTICE", "00000", msg, "", "")
}

// AppendParameterStatuses appends the ParameterStatus messages of a client's
// welcome: the pool's welcome parameters with the client's values where
// it has its own, then the client's other parameters; by name, so that
// every client of a pool sees the same order.
func AppendParameterStatuses(out []byte, welcome, params map[string]string) []byte {
	names := make([]string, 0, len(welcome)+len(params))
	for name := range welcome {
		names = append(names, name)
	}
	for name := range params {
		if _, ok := welcome[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		value, ok := params[name]
		if !ok {
			value = welcome[name]
		}
		out = AppendParameterStatus(out, name, value)
	}
	return out
}

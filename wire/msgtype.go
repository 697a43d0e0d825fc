package wire

import "strconv"

// FrontendType is the type byte of a message a client sends, BackendType
// that of a message a server sends; each String gives the protocol's name
// for it, for logs and errors.
//
// Two types rather than one because protocol 3.0 uses the same letters in
// both directions for different messages: 'D' is Describe from a client
// and DataRow from a server, and likewise 'C' (Close, CommandComplete),
// 'E' (Execute, ErrorResponse), 'S' (Sync, ParameterStatus) and 'H'
// (Flush, CopyOutResponse). One type's String could only say both names.
// Whoever reads a message knows which side it came from (a Reader reads
// one peer), so the conversion at that point picks the exact name.
//
// The Msg… constants stay plain bytes, which is what Reader.Next returns
// and what the pooler compares: FrontendType(typ).String() names one.
type (
	FrontendType byte
	BackendType  byte
)

// frontendNames and backendNames are indexed by type byte; "" is not a
// message of that direction.
var frontendNames = [256]string{
	MsgBind:         "Bind",
	MsgClose:        "Close",
	MsgCopyData:     "CopyData",
	MsgCopyDone:     "CopyDone",
	MsgCopyFail:     "CopyFail",
	MsgDescribe:     "Describe",
	MsgExecute:      "Execute",
	MsgFlush:        "Flush",
	MsgFunctionCall: "FunctionCall",
	MsgParse:        "Parse",
	// Also SASLInitialResponse, SASLResponse and GSSResponse, told apart
	// only by the authentication exchange they answer.
	MsgPassword:  "PasswordMessage",
	MsgQuery:     "Query",
	MsgSync:      "Sync",
	MsgTerminate: "Terminate",
}

var backendNames = [256]string{
	MsgAuthentication:       "Authentication",
	MsgBackendKeyData:       "BackendKeyData",
	MsgBindComplete:         "BindComplete",
	MsgCloseComplete:        "CloseComplete",
	MsgCommandComplete:      "CommandComplete",
	MsgCopyData:             "CopyData",
	MsgCopyDone:             "CopyDone",
	MsgCopyInResponse:       "CopyInResponse",
	MsgCopyOutResponse:      "CopyOutResponse",
	MsgCopyBothResponse:     "CopyBothResponse",
	MsgDataRow:              "DataRow",
	MsgEmptyQueryResponse:   "EmptyQueryResponse",
	MsgErrorResponse:        "ErrorResponse",
	MsgFunctionCallResponse: "FunctionCallResponse",
	MsgNegotiateProtocol:    "NegotiateProtocolVersion",
	MsgNoData:               "NoData",
	MsgNoticeResponse:       "NoticeResponse",
	MsgNotificationResponse: "NotificationResponse",
	MsgParameterDescription: "ParameterDescription",
	MsgParameterStatus:      "ParameterStatus",
	MsgParseComplete:        "ParseComplete",
	MsgPortalSuspended:      "PortalSuspended",
	MsgReadyForQuery:        "ReadyForQuery",
	MsgRowDescription:       "RowDescription",
}

// String returns the message's name, or "unknown frontend message 'x'".
func (t FrontendType) String() string {
	if n := frontendNames[t]; n != "" {
		return n
	}
	return "unknown frontend message " + quoteType(byte(t))
}

// String returns the message's name, or "unknown backend message 'x'".
func (t BackendType) String() string {
	if n := backendNames[t]; n != "" {
		return n
	}
	return "unknown backend message " + quoteType(byte(t))
}

// quoteType quotes a type byte as a Go character literal ('x', '\x00'),
// so that a stray byte in a log line is visible as one.
func quoteType(b byte) string {
	return strconv.QuoteRuneToASCII(rune(b))
}

// IsFrontendType reports whether typ is a message a logged-in client may
// send: the frontend messages of protocol 3.0 after authentication
// (PasswordMessage 'p' belongs to the login only). Postgres ends the
// session over any other ("invalid frontend message type"), PgBouncer the
// client ("unknown pkt").
func IsFrontendType(typ byte) bool {
	switch typ {
	case MsgBind, MsgClose, MsgCopyData, MsgCopyDone, MsgCopyFail,
		MsgDescribe, MsgExecute, MsgFlush, MsgFunctionCall, MsgParse,
		MsgQuery, MsgSync, MsgTerminate:
		return true
	}
	return false
}

// IsSmallMessage reports a message whose body is small by design (a
// name, or nothing): the pooler holds it to a tighter length limit than
// others.
func IsSmallMessage(typ byte) bool {
	switch typ {
	case MsgDescribe, MsgClose, MsgSync, MsgFlush, MsgTerminate, MsgCopyDone, MsgCopyFail:
		return true
	}
	return false
}

package wire

// What an event loop asks of a reader's buffered bytes: is a whole unit
// of work in (a request through its Sync or Query, a reply through its
// ReadyForQuery), and is it one the loop runs itself.

// ScanResult is Scan's answer.
type ScanResult uint8

const (
	ScanPartial ScanResult = iota // the last message is not in yet
	ScanWhole                     // whole, through the last message
	ScanOther                     // anything the loop leaves to a reader that waits
)

// Role is what one message type is to a Scan: part of the unit, its
// last message, or something the caller does not handle.
type Role uint8

const (
	RoleOther Role = iota
	RolePart
	RoleLast
)

// Scan walks the buffered messages, whole ones only, between messages,
// giving each type its role: ScanWhole when a last one is in with only
// parts before it (and, alone, nothing after it); ScanOther at a message
// of another role, a length Next would refuse, or a message larger than
// the buffer (Next streams it).
func (r *Reader) Scan(role func(byte) Role, alone bool) ScanResult {
	off := 0
	for {
		typ, next, ok, bad := r.FrameAt(off)
		switch {
		case bad, !ok && r.Full():
			return ScanOther
		case !ok:
			return ScanPartial
		}
		switch role(typ) {
		case RoleLast:
			if alone && next != r.Buffered() {
				return ScanOther // pipelined
			}
			return ScanWhole
		case RolePart:
			off = next
		default:
			return ScanOther
		}
	}
}

// RequestRole: a request an event loop runs is Parse, Bind, Describe,
// Execute and Close messages ending with a Sync, or a Query.
func RequestRole(typ byte) Role {
	switch typ {
	case MsgSync, MsgQuery:
		return RoleLast
	case MsgParse, MsgBind, MsgDescribe, MsgExecute, MsgClose:
		return RolePart
	}
	return RoleOther
}

// ReplyRole: a reply an event loop relays holds only the messages of a
// query's or an extended batch's answer, through ReadyForQuery.
func ReplyRole(typ byte) Role {
	switch typ {
	case MsgReadyForQuery:
		return RoleLast
	case MsgParseComplete, MsgBindComplete, MsgCloseComplete, MsgCommandComplete,
		MsgDataRow, MsgErrorResponse, MsgEmptyQueryResponse, MsgNoticeResponse,
		MsgNoData, MsgPortalSuspended, MsgParameterDescription, MsgRowDescription,
		MsgParameterStatus, MsgNotificationResponse:
		return RolePart
	}
	return RoleOther
}

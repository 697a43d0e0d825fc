package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// DefaultBufferSize is the read and write buffer size of a connection. Bodies
// up to this size are handed out as slices into the buffer; larger ones are
// streamed.
const DefaultBufferSize = 16 * 1024

// ErrMessageTooLarge is returned when a message length exceeds the reader's
// limit (max_packet_size), by Body and Message for a message that does not
// fit the buffer, and by ReadBodyMax for a body over its cap.
var ErrMessageTooLarge = errors.New("wire: message too large")

// ErrBadLength is returned for a length field smaller than 4.
var ErrBadLength = errors.New("wire: invalid message length")

// Reader reads framed messages from r. It is not safe for concurrent use:
// exactly one goroutine reads a connection at a time.
//
// A read error never loses bytes already received: after a timeout the next
// call resumes where the last one stopped, so callers may use read deadlines
// to interrupt a blocked reader.
type Reader struct {
	r        io.Reader
	buf      []byte
	size     int // len(buf) when allocated (see DropBuffer)
	start    int // first unconsumed byte
	end      int // one past the last received byte
	maxLen   int // largest accepted message (header included); 0 = no limit
	typ      byte
	bodyLen  int // body length of the current message
	consumed bool
	// streamed counts the bytes of the current message (header included)
	// already handed out by Forward while streaming a message larger than the
	// buffer; a Forward interrupted by a read error resumes from there.
	streamed int
	// partial holds what ReadBody copied of the current message so far;
	// non-nil only while a ReadBody interrupted by a read error is pending.
	partial []byte
	// budget, when set, is charged for the bodies ReadBody copies out;
	// reserved is what the current (or last) message holds of it.
	budget   *Budget
	reserved int64
	// pool, when set, lends the buffer (NewPooledReader): taken by the
	// first read that needs it, given back by DropBuffer, FreeBuffer or a
	// Grow that replaces it. lent is the pool's box for it while lent.
	pool *sync.Pool
	lent *[]byte
}

// NewReader returns a Reader with a buffer of size bytes.
func NewReader(r io.Reader, size int) *Reader {
	if size < 64 {
		size = 64
	}
	return &Reader{r: r, buf: make([]byte, size), size: size, consumed: true}
}

// NewPooledReader is NewReader with a buffer borrowed from a pool shared
// by all connections of that size, taken by the first read and given back
// when the connection goes idle for long (DropBuffer) or ends
// (FreeBuffer). A login then leaves no read buffer behind for the
// collector, and thousands of logins in a burst reuse a few buffers. The
// bytes handed out (Body, Peek, Message, Ahead) are valid until the next
// call on the reader, as always; after DropBuffer or FreeBuffer they are
// another connection's to overwrite, so nothing may keep them past the
// message it is handling (the pooler copies what it keeps).
func NewPooledReader(r io.Reader, size int) *Reader {
	if size < 64 {
		size = 64
	}
	return &Reader{r: r, size: size, consumed: true, pool: bufPool(size)}
}

// grab gives the reader its buffer: from the pool, or made.
func (r *Reader) grab() {
	if r.pool == nil {
		r.buf = make([]byte, r.size)
		return
	}
	r.lent = r.pool.Get().(*[]byte)
	r.buf = (*r.lent)[:r.size]
}

// giveBack returns a lent buffer to the pool; the reader holds none.
func (r *Reader) giveBack() {
	if r.lent != nil {
		*r.lent = r.buf[:0]
		r.pool.Put(r.lent)
		r.lent = nil
	}
	r.buf = nil
}

// FreeBuffer gives the buffer back when the connection is done with:
// whatever it held is dropped. The pooler calls it when a client leaves.
// A later read (there should be none) takes a buffer again.
func (r *Reader) FreeBuffer() {
	r.giveBack()
	r.start, r.end = 0, 0
}

// DropBuffer frees the read buffer of a reader that holds nothing: no
// received bytes and no message in progress. The next read allocates a new
// one. It is for connections that go idle for long (a parked client), so
// thousands of them hold no buffer; false (and nothing changes) when bytes
// are pending.
//
// The reservation of the last message (see SetBudget) is released: a
// reader is parked only after that message was dealt with.
func (r *Reader) DropBuffer() bool {
	if r.consumed {
		r.release()
	}
	if r.start != r.end || !r.consumed || r.partial != nil {
		return false
	}
	r.giveBack()
	r.start, r.end = 0, 0
	return true
}

// SetMaxMessageSize limits the total length (header included) of accepted
// messages; 0 means no limit beyond the protocol's own.
func (r *Reader) SetMaxMessageSize(n int) { r.maxLen = n }

// SetBudget makes ReadBody reserve the length of every body it copies out
// (one larger than the buffer) from b before allocating for it, and fail
// with ErrBudgetExceeded when b has not that much left. The reservation is
// held until the message is done with: the next Next, DropBuffer or
// Release. nil (the default) means no budget. A reservation already held
// is returned to the previous budget.
func (r *Reader) SetBudget(b *Budget) {
	r.release()
	r.budget = b
}

// Release returns the current message's reservation to the budget and lets
// go of a body that an interrupted ReadBody was assembling. The pooler calls
// it when the client leaves. A message whose ReadBody was interrupted can
// afterwards only be skipped.
func (r *Reader) Release() {
	r.release()
	r.partial = nil
}

func (r *Reader) release() {
	if r.reserved != 0 {
		r.budget.release(r.reserved)
		r.reserved = 0
	}
}

// Source is what the Reader reads from.
func (r *Reader) Source() io.Reader { return r.r }

// Buffered reports how many received bytes have not been consumed yet. A
// relay flushes its writer when this drops to zero: the peer's batch is done.
func (r *Reader) Buffered() int { return r.end - r.start }

// maxEmptyReads bounds consecutive (0, nil) reads before fill gives up with
// io.ErrNoProgress instead of spinning (same policy as bufio).
const maxEmptyReads = 100

// fill reads at least need bytes into the buffer starting at r.start,
// compacting first when the tail is too short. An io.EOF before need bytes
// arrived becomes io.ErrUnexpectedEOF when midMessage is set or some bytes
// are already buffered; io.EOF is only returned at a message boundary.
func (r *Reader) fill(need int, midMessage bool) error {
	if r.end-r.start >= need {
		return nil
	}
	if r.buf == nil {
		r.grab() // the first read, or after DropBuffer
	}
	if need > len(r.buf) {
		return fmt.Errorf("wire: fill %d exceeds buffer %d", need, len(r.buf))
	}
	if r.start == r.end {
		// Nothing pending: read into the whole buffer, not just its tail.
		r.start, r.end = 0, 0
	} else if len(r.buf)-r.start < need {
		n := copy(r.buf, r.buf[r.start:r.end])
		r.start, r.end = 0, n
	}
	for empty := 0; r.end-r.start < need; {
		n, err := r.r.Read(r.buf[r.end:])
		r.end += n
		if err != nil {
			if r.end-r.start >= need {
				return nil
			}
			if err == io.EOF && (midMessage || r.end-r.start > 0) {
				return io.ErrUnexpectedEOF
			}
			return err
		}
		if n > 0 {
			empty = 0
		} else if empty++; empty >= maxEmptyReads {
			return io.ErrNoProgress
		}
	}
	return nil
}

// Next advances to the next message and returns its type and body length.
// The previous message must have been consumed by Body, Forward or Skip.
func (r *Reader) Next() (typ byte, bodyLen int, err error) {
	if !r.consumed {
		return 0, 0, errors.New("wire: BUG: Next before the previous message was consumed")
	}
	r.release() // the previous message is done with
	if err := r.fill(5, false); err != nil {
		return 0, 0, err
	}
	h := r.buf[r.start : r.start+5]
	n := int(binary.BigEndian.Uint32(h[1:5]))
	if n < 4 {
		return 0, 0, ErrBadLength
	}
	if r.maxLen > 0 && n+1 > r.maxLen {
		return 0, 0, ErrMessageTooLarge
	}
	r.typ = h[0]
	r.bodyLen = n - 4
	r.consumed = false
	r.streamed = 0
	r.partial = nil
	return r.typ, r.bodyLen, nil
}

// BodyLen returns the current message's body length.
func (r *Reader) BodyLen() int { return r.bodyLen }

// Type returns the current message's type byte.
func (r *Reader) Type() byte { return r.typ }

// Grow makes the buffer hold at least n bytes, keeping what it holds, so
// that a message up to n bytes long (header included) can be peeked at
// whole: the sharding router reads a statement longer than a client's
// small buffer before it chooses a server. Slices from Peek or Body are
// invalid after it. The buffer a DropBuffer later frees comes back at the
// reader's own size.
func (r *Reader) Grow(n int) {
	if n <= len(r.buf) {
		return
	}
	buf := make([]byte, n)
	r.end = copy(buf, r.buf[r.start:r.end])
	r.start = 0
	r.giveBack() // a lent buffer goes back; the grown one is the reader's
	r.buf = buf
}

// Ahead returns the bytes received after the current message, which must
// be in the buffer whole (Pending): the messages a client pipelined behind
// it, the last perhaps in part. Valid until the next call on r.
func (r *Reader) Ahead() []byte {
	if r.consumed || r.streamed > 0 || r.end-r.start < 5+r.bodyLen {
		return nil
	}
	return r.buf[r.start+5+r.bodyLen : r.end : r.end]
}

// FillAhead waits for more bytes after those buffered, the current
// message kept where it is in the buffer (slices from Peek must be taken
// again). It fails when the buffer is full.
func (r *Reader) FillAhead() error {
	n := r.end - r.start
	if n >= len(r.buf) {
		return errors.New("wire: FillAhead with a full buffer")
	}
	return r.fill(n+1, true)
}

// Fits reports whether the current message fits the buffer whole.
func (r *Reader) Fits() bool { return 5+r.bodyLen <= len(r.buf) }

// Body returns the current message's body as a slice into the buffer, valid
// until the next call on r; its capacity ends with it (see doc.go). It fails
// for messages that do not fit the buffer; callers that must decode such
// messages use ReadBody or stream them with Forward instead.
func (r *Reader) Body() ([]byte, error) {
	m, err := r.Message()
	if err != nil {
		return nil, err
	}
	return m[5:], nil
}

// Message is like Body but returns the whole message, header included.
func (r *Reader) Message() ([]byte, error) {
	if r.consumed || r.streamed > 0 {
		return nil, errors.New("wire: BUG: Message without Next")
	}
	if !r.Fits() {
		return nil, ErrMessageTooLarge
	}
	if err := r.fill(5+r.bodyLen, true); err != nil {
		return nil, err
	}
	end := r.start + 5 + r.bodyLen
	b := r.buf[r.start:end:end]
	r.start = end
	r.consumed = true
	return b, nil
}

// Forward copies the current message, header included, to w. Messages that
// fit the buffer are copied in one piece; larger ones are streamed through the
// buffer chunk by chunk. A nil w discards the message.
func (r *Reader) Forward(w *Writer) error {
	if r.consumed {
		return errors.New("wire: BUG: Forward without Next")
	}
	if r.Fits() {
		msg, err := r.Message()
		if err != nil {
			return err
		}
		if w != nil {
			return w.Write(msg)
		}
		return nil
	}
	// Streaming: header first (only once), then the body in chunks.
	total := 5 + r.bodyLen
	for r.streamed < total {
		if r.end == r.start {
			if err := r.fill(1, true); err != nil {
				return err
			}
		}
		chunk := min(r.end-r.start, total-r.streamed)
		if w != nil {
			if err := w.Write(r.buf[r.start : r.start+chunk : r.start+chunk]); err != nil {
				return err
			}
		}
		r.start += chunk
		r.streamed += chunk
	}
	r.consumed = true
	return nil
}

// Skip discards the current message.
func (r *Reader) Skip() error { return r.Forward(nil) }

// Peek returns up to n leading bytes of the current message's body without
// consuming it (fewer when the body is shorter). n is capped so that header
// and prefix fit the buffer.
func (r *Reader) Peek(n int) ([]byte, error) {
	if r.consumed || r.streamed > 0 {
		return nil, errors.New("wire: BUG: Peek without Next")
	}
	n = min(n, r.bodyLen, len(r.buf)-5)
	if err := r.fill(5+n, true); err != nil {
		return nil, err
	}
	return r.buf[r.start+5 : r.start+5+n : r.start+5+n], nil
}

// ForwardBodyFrom writes the current message's body from offset skip to its
// end to w, without the header: the caller has written a rewritten header
// and prefix itself. The message is consumed.
func (r *Reader) ForwardBodyFrom(w *Writer, skip int) error {
	if r.consumed {
		return errors.New("wire: BUG: ForwardBodyFrom without Next")
	}
	if skip > r.bodyLen {
		return errors.New("wire: BUG: ForwardBodyFrom beyond the body")
	}
	// Drop header and prefix, then stream the rest as Forward does. After a
	// read error the retried call resumes from r.streamed, like Forward.
	for r.streamed < 5+skip {
		if r.end == r.start {
			if err := r.fill(1, true); err != nil {
				return err
			}
		}
		k := min(5+skip-r.streamed, r.end-r.start)
		r.start += k
		r.streamed += k
	}
	total := 5 + r.bodyLen
	for r.streamed < total {
		if r.end == r.start {
			if err := r.fill(1, true); err != nil {
				return err
			}
		}
		chunk := min(r.end-r.start, total-r.streamed)
		if err := w.Write(r.buf[r.start : r.start+chunk : r.start+chunk]); err != nil {
			return err
		}
		r.start += chunk
		r.streamed += chunk
	}
	r.consumed = true
	return nil
}

// ReadBody returns the whole body of the current message: a slice into the
// buffer when it fits, else the body copied into dst when dst has room for
// it, else into a new slice of exactly the body's length, made once. It is
// for the few large messages the pooler must decode (a Parse with a long
// query text). dst may be a body an earlier call returned: no slice the
// Reader hands out has capacity into its buffer, so that is safe.
//
// With a Budget set (SetBudget), a body copied out is first reserved from
// it; ErrBudgetExceeded leaves the message unread. Without one, a body over
// preallocUnbudgeted is not trusted to be as long as its header says: the
// copy grows with the bytes that actually arrive.
//
// After a read error the retried call resumes: the bytes copied so far are
// kept in r.partial, not lost with the failed call's result.
func (r *Reader) ReadBody(dst []byte) ([]byte, error) { return r.readBody(dst, -1) }

// ReadBodyMax is ReadBody for a message the caller only takes up to limit
// body bytes of (a Describe, a Close, a console command): a longer one
// fails with ErrMessageTooLarge before anything is read or allocated, and
// stays current for the caller to Skip.
func (r *Reader) ReadBodyMax(dst []byte, limit int) ([]byte, error) {
	if limit < 0 {
		limit = 0
	}
	return r.readBody(dst, limit)
}

// preallocUnbudgeted is the largest body ReadBody allocates for up front,
// on the word of the length field alone, when no Budget is set.
const preallocUnbudgeted = 1 << 20

func (r *Reader) readBody(dst []byte, limit int) ([]byte, error) {
	if r.consumed || (r.streamed > 0 && r.partial == nil) {
		return nil, errors.New("wire: BUG: ReadBody without Next")
	}
	if limit >= 0 && r.bodyLen > limit {
		return nil, ErrMessageTooLarge
	}
	if r.Fits() {
		return r.Body()
	}
	if r.partial == nil {
		if r.budget != nil {
			if !r.budget.reserve(int64(r.bodyLen)) {
				return nil, ErrBudgetExceeded
			}
			r.reserved = int64(r.bodyLen)
		}
		switch {
		case cap(dst) >= r.bodyLen:
			r.partial = dst[:0]
		case r.budget == nil && r.bodyLen > preallocUnbudgeted:
			r.partial = make([]byte, 0, preallocUnbudgeted)
		default:
			r.partial = make([]byte, 0, r.bodyLen)
		}
	}
	total := 5 + r.bodyLen
	for r.streamed < total {
		if r.end == r.start {
			if err := r.fill(1, true); err != nil {
				return nil, err
			}
		}
		chunk := min(r.end-r.start, total-r.streamed)
		if r.streamed < 5 {
			chunk = min(chunk, 5-r.streamed) // the header is dropped
		} else {
			if len(r.partial)+chunk > cap(r.partial) {
				// Only without a budget, past preallocUnbudgeted.
				grown := make([]byte, len(r.partial), min(r.bodyLen, max(2*cap(r.partial), len(r.partial)+chunk)))
				copy(grown, r.partial)
				r.partial = grown
			}
			r.partial = append(r.partial, r.buf[r.start:r.start+chunk]...)
		}
		r.start += chunk
		r.streamed += chunk
	}
	body := r.partial
	r.partial = nil
	r.consumed = true
	return body, nil
}

// TryReader is a source that can read without waiting: an event loop's
// (internal/netpoll's Conn, SocketIO's wrapper of a plain socket).
type TryReader interface {
	// TryRead is one read: again when nothing is there now, io.EOF at
	// the end of the stream.
	TryRead(p []byte) (n int, again bool, err error)
}

// ErrCannotTry is FillNow's error for a source that cannot read without
// waiting.
var ErrCannotTry = errors.New("wire: the source cannot read without waiting")

// FillNow reads what the source has now, after the bytes buffered, never
// waiting: an event loop's read. drained reports that the source had no
// more then (its read found nothing, or less than there was room for), so
// that an edge-triggered loop knows it will be told of the next bytes.
// Not of the end: a peer's close that came in the same edge as its last
// bytes gives no other, so with hup (the loop was told of a hang-up) a
// read that got bytes is not drained: the next one meets the end. A full
// buffer reads nothing and is not drained. Only between messages (the
// last one consumed).
func (r *Reader) FillNow(hup bool) (drained bool, err error) {
	tr, ok := r.r.(TryReader)
	if !ok {
		return false, ErrCannotTry
	}
	if !r.consumed || r.streamed > 0 {
		return false, errors.New("wire: BUG: FillNow inside a message")
	}
	if r.buf == nil {
		r.grab()
	}
	if r.start == r.end {
		r.start, r.end = 0, 0
	} else if r.end == len(r.buf) && r.start > 0 {
		n := copy(r.buf, r.buf[r.start:r.end])
		r.start, r.end = 0, n
	}
	room := len(r.buf) - r.end
	if room == 0 {
		return false, nil
	}
	n, again, err := tr.TryRead(r.buf[r.end:])
	r.end += n
	if err != nil {
		return true, err
	}
	return again || n < room && !(hup && n > 0), nil
}

// Full reports whether the buffered bytes fill the buffer: a message that
// has not all arrived by then never will without a reader that waits
// (Next, which streams it).
func (r *Reader) Full() bool { return r.buf != nil && r.end-r.start >= len(r.buf) }

// FrameAt looks at the message that begins off bytes after the next
// unread one, between messages: its type and where the next one begins,
// when it is buffered whole (ok). bad reports a length field that Next
// would refuse (under 4, or over the maximum size).
func (r *Reader) FrameAt(off int) (typ byte, next int, ok, bad bool) {
	b := r.buf[r.start+off : r.end]
	if len(b) < 5 {
		return 0, 0, false, false
	}
	n := int(binary.BigEndian.Uint32(b[1:5]))
	if n < 4 || r.maxLen > 0 && n+1 > r.maxLen {
		return b[0], 0, false, true
	}
	if len(b) < 1+n {
		return b[0], 0, false, false
	}
	return b[0], off + 1 + n, true, false
}

// Pending reports whether a whole next message is already buffered, so a
// relay can keep batching without blocking on the peer. When it is false,
// reading on may block: flush what was batched first.
func (r *Reader) Pending() bool {
	n := r.end - r.start
	if n < 5 {
		return false
	}
	l := int(binary.BigEndian.Uint32(r.buf[r.start+1 : r.start+5]))
	return n >= 1+l
}

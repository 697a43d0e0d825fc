// Package wire frames PostgreSQL protocol 3.0 messages over a buffered
// connection without copying message bodies.
//
// The pooler forwards almost every message as opaque bytes. A Reader peeks the
// five-byte header (type byte and big-endian length that includes itself),
// and the caller either asks for the body as a slice into the read buffer
// (valid until the next call) or forwards the whole message to a Writer. A
// message larger than the read buffer is streamed through in chunks, so memory
// per connection stays bounded by the buffer size regardless of message size.
//
// # Slices handed out
//
// Message, Body, Peek and ReadBody (for a message that fits) return slices
// of the read buffer, and Forward and ForwardBodyFrom write chunks of it.
// Each is cut with a full slice expression (buf[a:b:b]), so its capacity
// ends where its length does: a caller that appends to one, or keeps one
// as scratch (the pooler reuses a ReadBody result for the next large Parse),
// gets a fresh array from append instead of writing into the buffer that
// the next read fills. We chose that over copying because copies would
// cost an allocation or a memmove per message on the relay path. The slices
// stay valid until the next call on the Reader; no caller keeps a body past
// the next read: what it must keep (a statement text, an unnamed Parse) it
// copies.
//
// # Large bodies and the Budget
//
// A body larger than the buffer that the caller must see whole (ReadBody)
// is copied out: into the caller's dst when it has room, else into one new
// slice of exactly the body's length, so a message costs its own size and
// no append doubling. The length comes from the peer's header, so a shared
// Budget is charged the length before anything is allocated
// (ErrBudgetExceeded when it has not that much left) and gets it back when
// the message is done with: at the next Next, DropBuffer, or Release (the
// client left). ReadBodyMax also caps one call (a Describe, a Close, a
// console command). A reader with no Budget trusts a header only up to
// 1 MiB and beyond that grows the copy with the bytes that arrive.
//
// # Writer and the pooled writer
//
// A Writer gathers messages in its buffer and writes them to the
// connection in one system call per Flush; a write larger than the buffer
// goes straight through after what is pending. Once a write fails the
// error sticks: every later call returns it, so a caller may write a batch
// and check only the Flush. A Writer is not safe for concurrent use: it
// belongs to one goroutine at a time (the pooler hands a client's writer
// between the goroutine serving the client and the pump relaying a
// server's replies; pooler's doc.go says when).
//
// NewPooledWriter makes a Writer that holds a buffer only while it has
// something to write: the buffer is taken from a sync.Pool shared by all
// writers of that size at the first Write and given back by the Flush that
// empties it. The pooler uses it for client connections, of which there
// are many and most are idle between transactions, so memory follows the
// clients that are busy, not the clients that are connected. Server
// connections keep their own buffer (NewWriter). The pooled buffer
// travels in the same *[]byte box each time it is lent and returned,
// because boxing the slice anew on each Flush would cost an allocation
// per transaction.
//
// # SocketIO
//
// SocketIO(conn) is what the pooler gives a Reader and a Writer instead of
// conn itself. For a plain TCP or Unix socket on Linux it is a wrapper
// that makes read(2) and write(2) as raw system calls (internal/netpoll)
// on the non-blocking descriptor and, when the socket is not ready, waits
// in the runtime's netpoller through syscall.RawConn, as net.Conn does.
// The point is that the goroutine's P never enters the runtime's
// system-call state for calls that cannot block: entering it wakes the
// runtime's monitor thread to take the P back, which costs a measurable
// share of a busy pooler's CPU. Any other conn (TLS), and every conn on
// systems where netpoll has no raw calls, is returned as it is.
//
// The wrapper keeps the net.Conn contract its callers rely on: deadlines
// and Close from another goroutine interrupt a wait (the waiting is net's
// own), one goroutine may read while another writes (reads, writes and
// WriteAwaitReply each have their own fields), and net serialises readers
// among themselves and writers among themselves. The descriptor stays
// owned by the net.Conn: SocketIO neither closes it nor changes its mode.
//
// # FlushAwaitReply
//
// Writer.FlushAwaitReply is Flush for a request whose reply the caller
// reads next. When the Writer's connection is a ReplyAwaiter, as
// SocketIO's wrapper is, it writes the buffer from inside net's read wait
// and returns once the socket has turned readable: the reply has started
// to arrive. A plain Flush followed by Read would first make a read(2)
// that finds nothing (the peer cannot have answered yet) and only then
// park; that read is one system call per round trip, which
// FlushAwaitReply saves. Writing inside the wait, after
// net has reset the socket's readiness, is what makes this safe: a reply
// that arrived before the reset would never wake a wait begun after it.
//
// It is for a peer that answers every request (a PostgreSQL server after
// Sync or Query), and only when no other goroutine reads that socket: the
// wait holds net's read lock. A wait that fails (read deadline, Close) is
// not reported; the next Read meets it. When the send buffer fills up, the
// rest is written the ordinary way. On any other connection it is Flush.
//
// # Decoders and encoders
//
// Only the messages the pooler must look inside have decoders here:
// ReadyForQuery, ParameterStatus, ErrorResponse, BackendKeyData,
// CommandComplete, the startup-phase packets (StartupMessage, SSLRequest,
// GSSENCRequest, CancelRequest), and, in extended.go, the extended-query
// messages that prepared-statement mapping rewrites: Parse (DecodeParse),
// the names at the start of a Bind (DecodeBindHead, which reads a prefix
// so that the parameters need not be held), Describe and Close
// (DecodeTarget), and DataRow (a DataRow reads one column at a time,
// for the pooler's auth_query). The extended-query decoders take a body,
// return slices of it and allocate nothing (they run on every Parse and
// Bind a mapped client sends); none reads past the body it is given, and
// a malformed one gives ok=false, never a panic. Their fuzz targets
// (fuzz_test.go, beside those of ReadStartup, Reader and
// ParseErrorResponse) check that, and that what they accept re-encodes to
// the same bytes.
//
// Messages the pooler writes itself (errors, the welcome, SET queries, the
// Parse, Bind, Describe, Close, Execute and Sync of statements it prepares
// under its own names or runs for auth_query, CopyFail for a client that
// left mid-COPY) have small encoders that append to a caller-provided
// buffer. Some encode only part of a message, for a body the pooler
// writes by reference rather than copy: AppendHeader heads a body kept as
// received (a client's remembered unnamed Parse), AppendParseHead and
// AppendParseTail go around a long statement text written separately,
// and AppendBindHead renames a client's Bind whose parameters are then
// forwarded as they arrived. The length each writes counts the part the
// caller supplies.
//
// Message types are bytes (the Msg… constants); FrontendType and
// BackendType name them for logs, one type per direction because the
// protocol gives some letters a different message in each (msgtype.go).
//
// Protocol reference: https://www.postgresql.org/docs/current/protocol-message-formats.html
package wire

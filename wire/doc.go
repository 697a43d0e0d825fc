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
// Only the few messages the pooler must look inside have decoders here:
// ReadyForQuery, ParameterStatus, ErrorResponse, BackendKeyData,
// CommandComplete, and the startup-phase packets (StartupMessage,
// SSLRequest, GSSENCRequest, CancelRequest). Messages the pooler generates
// itself (errors, the welcome, SET queries) have small encoders that append
// to a caller-provided buffer.
//
// Protocol reference: https://www.postgresql.org/docs/current/protocol-message-formats.html
package wire

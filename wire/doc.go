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
// Only the few messages the pooler must look inside have decoders here:
// ReadyForQuery, ParameterStatus, ErrorResponse, BackendKeyData,
// CommandComplete, and the startup-phase packets (StartupMessage,
// SSLRequest, GSSENCRequest, CancelRequest). Messages the pooler generates
// itself (errors, the welcome, SET queries) have small encoders that append
// to a caller-provided buffer.
//
// Protocol reference: https://www.postgresql.org/docs/current/protocol-message-formats.html
package wire

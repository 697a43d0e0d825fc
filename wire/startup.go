package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Request codes carried in place of a protocol version in the first packet.
const (
	ProtocolVersion30    = 3 << 16 // 3.0
	sslRequestCode       = 80877103
	gssEncRequestCode    = 80877104
	cancelRequestCode    = 80877102
	maxStartupPacketSize = 10000 // PostgreSQL's MAX_STARTUP_PACKET_LENGTH
)

// StartupKind says what the first packet of a connection asked for.
type StartupKind int

const (
	StartupMessage StartupKind = iota + 1
	SSLRequest
	GSSENCRequest
	CancelRequest
)

// Param is one startup parameter, in the order the client sent it.
type Param struct{ Name, Value string }

// Startup is a decoded first packet.
type Startup struct {
	Kind StartupKind
	// Major and Minor are the requested protocol version (StartupMessage).
	Major, Minor uint16
	Params       []Param
	// CancelKey is the 8-byte (pid, secret) pair of a CancelRequest.
	CancelKey [8]byte
}

// Get returns the value of a startup parameter.
func (s *Startup) Get(name string) (string, bool) {
	for _, p := range s.Params {
		if p.Name == name {
			return p.Value, true
		}
	}
	return "", false
}

// StartupError is a malformed first packet; Message is safe to send to the
// client.
type StartupError struct{ Message string }

func (e *StartupError) Error() string { return "wire: " + e.Message }

// ErrOldProtocol is returned for protocol major versions below 3.
var ErrOldProtocol = &StartupError{Message: "old V2 protocol not supported"}

// ReadStartup reads one untyped startup-phase packet from r.
func ReadStartup(r io.Reader) (*Startup, error) {
	var h [8]byte
	if _, err := io.ReadFull(r, h[:4]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(h[:4]))
	if n < 8 || n > maxStartupPacketSize {
		return nil, &StartupError{Message: "invalid startup packet layout: bad length"}
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return ParseStartup(body)
}

// ReadStartup reads one startup packet (SSLRequest, GSSENCRequest,
// CancelRequest or StartupMessage) through r's buffer, as the package's
// ReadStartup does from a plain reader. A client's first packets arrive
// in one read each instead of two (the length, then the rest), and bytes
// the client sent after the packet stay buffered for the next read: the
// caller that starts TLS next must check Buffered is 0 (PostgreSQL refuses
// unencrypted data after an SSLRequest).
func (r *Reader) ReadStartup() (*Startup, error) {
	if !r.consumed {
		return nil, errors.New("wire: BUG: ReadStartup before the previous message was consumed")
	}
	if err := r.fill(4, false); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(r.buf[r.start : r.start+4]))
	if n < 8 || n > maxStartupPacketSize {
		return nil, &StartupError{Message: "invalid startup packet layout: bad length"}
	}
	if n <= len(r.buf) {
		if err := r.fill(n, true); err != nil {
			return nil, err
		}
		body := r.buf[r.start+4 : r.start+n]
		r.start += n
		return ParseStartup(body)
	}
	// Larger than the buffer (up to maxStartupPacketSize): what is
	// buffered, then the rest straight from the socket.
	body := make([]byte, n-4)
	got := copy(body, r.buf[r.start+4:r.end])
	r.start += 4 + got
	if _, err := io.ReadFull(r.r, body[got:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return ParseStartup(body)
}

// ParseStartup decodes a startup packet body (everything after the length).
func ParseStartup(body []byte) (*Startup, error) {
	if len(body) < 4 {
		return nil, &StartupError{Message: "invalid startup packet layout: too short"}
	}
	code := binary.BigEndian.Uint32(body[:4])
	rest := body[4:]
	switch code {
	case sslRequestCode:
		return &Startup{Kind: SSLRequest}, nil
	case gssEncRequestCode:
		return &Startup{Kind: GSSENCRequest}, nil
	case cancelRequestCode:
		if len(rest) != 8 {
			return nil, &StartupError{Message: "invalid cancel request length"}
		}
		s := &Startup{Kind: CancelRequest}
		copy(s.CancelKey[:], rest)
		return s, nil
	}
	major, minor := uint16(code>>16), uint16(code)
	if major < 3 {
		return nil, ErrOldProtocol
	}
	if major > 3 {
		return nil, &StartupError{Message: fmt.Sprintf("unsupported frontend protocol %d.%d: server supports 3.0 to 3.0", major, minor)}
	}
	s := &Startup{Kind: StartupMessage, Major: major, Minor: minor}
	for len(rest) > 0 {
		if rest[0] == 0 {
			if len(rest) != 1 {
				return nil, &StartupError{Message: "invalid startup packet layout: expected terminator as last byte"}
			}
			return s, nil
		}
		name, r1, ok := cstring(rest)
		if !ok {
			return nil, &StartupError{Message: "invalid startup packet layout: unterminated name"}
		}
		value, r2, ok := cstring(r1)
		if !ok {
			return nil, &StartupError{Message: "invalid startup packet layout: missing value for " + name}
		}
		s.Params = append(s.Params, Param{Name: name, Value: value})
		rest = r2
	}
	return nil, &StartupError{Message: "invalid startup packet layout: expected terminator as last byte"}
}

func cstring(b []byte) (s string, rest []byte, ok bool) {
	for i, c := range b {
		if c == 0 {
			return string(b[:i]), b[i+1:], true
		}
	}
	return "", nil, false
}

// AppendStartup encodes a StartupMessage for protocol 3.0 (used by tests).
func AppendStartup(dst []byte, params []Param) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, ProtocolVersion30)
	for _, p := range params {
		dst = append(dst, p.Name...)
		dst = append(dst, 0)
		dst = append(dst, p.Value...)
		dst = append(dst, 0)
	}
	dst = append(dst, 0)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst
}

// AppendCancelRequest encodes a CancelRequest packet for key.
func AppendCancelRequest(dst []byte, key []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(8+len(key)))
	dst = binary.BigEndian.AppendUint32(dst, cancelRequestCode)
	return append(dst, key...)
}

// AppendSSLRequest encodes an SSLRequest packet, which asks a server to
// start TLS before the StartupMessage.
func AppendSSLRequest(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, 8)
	return binary.BigEndian.AppendUint32(dst, sslRequestCode)
}

// errShort is returned by decoders for truncated bodies.
var errShort = errors.New("wire: truncated message body")

//go:build linux

package integration

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// rawReply is what the pooler did with a connection after bad input.
type rawReply struct {
	errs   []*pgproto3.ErrorResponse // ErrorResponses received, in order
	other  []string                  // any other message types received
	closed bool                      // the pooler closed the connection (EOF or reset)
	raw    []byte
}

// readUntilClose reads messages from conn until the pooler closes it or
// timeout passes (closed stays false then).
func readUntilClose(t testing.TB, conn net.Conn, timeout time.Duration) rawReply {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(timeout))
	var buf bytes.Buffer
	_, err := io.Copy(&buf, conn)
	var r rawReply
	r.raw = buf.Bytes()
	var ne net.Error
	switch {
	case err == nil, errors.Is(err, syscall.ECONNRESET):
		r.closed = true
	case errors.As(err, &ne) && ne.Timeout():
	case errors.Is(err, os.ErrDeadlineExceeded):
	default:
		t.Logf("read: %v", err)
		r.closed = true
	}
	fe := pgproto3.NewFrontend(bytes.NewReader(r.raw), io.Discard)
	for {
		msg, err := fe.Receive()
		if err != nil {
			break
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			c := *m
			r.errs = append(r.errs, &c)
		default:
			r.other = append(r.other, fmt.Sprintf("%T", m))
		}
	}
	return r
}

// wantErrorOrClose asserts the pooler answered bad input with at most one
// FATAL ErrorResponse (08P01 if there is one) and closed the connection.
func wantErrorOrClose(t testing.TB, what string, r rawReply) {
	t.Helper()
	switch {
	case !r.closed:
		t.Errorf("%s: connection still open after 5 s (got %d bytes: %q); want an error or a close", what, len(r.raw), r.raw)
	case len(r.other) > 0:
		t.Errorf("%s: got unexpected messages %v (raw %q)", what, r.other, r.raw)
	case len(r.errs) == 0 && len(r.raw) > 0:
		t.Errorf("%s: got %d undecodable bytes %q before close", what, len(r.raw), r.raw)
	case len(r.errs) == 0:
		t.Logf("%s: clean close, no ErrorResponse", what)
	default:
		e := r.errs[0]
		t.Logf("%s: ErrorResponse %s %s %q, then close", what, e.Severity, e.Code, e.Message)
		if e.Severity != "FATAL" || e.Code != "08P01" {
			t.Errorf("%s: got %s %s %q, want FATAL 08P01", what, e.Severity, e.Code, e.Message)
		}
	}
}

func startupPacket(params ...string) []byte {
	body := binary.BigEndian.AppendUint32(nil, 196608) // protocol 3.0
	for _, p := range params {
		body = append(body, p...)
		body = append(body, 0)
	}
	body = append(body, 0)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body)+4)), body...)
}

// TestBadInput: garbage bytes, a truncated startup packet, a 2 GB length
// header (in the startup packet and in a message after login) and an
// unknown startup parameter each get a clear error or a clean close, and
// the pooler keeps serving a normal client throughout.
func TestBadInput(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(nil, ""), testUserlist)

	// A client that stays connected across all the bad input.
	bystander := connectPgx(t, p.App())

	huge := binary.BigEndian.AppendUint32(nil, 0x7fffffff)
	cases := []struct {
		name    string
		payload []byte
		hangUp  bool // close our side right after writing
	}{
		{"http request", []byte("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"), false},
		{"random bytes", bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef, 0x00, 0x13, 0x37, 0x42}, 16), false},
		{"unknown protocol code", []byte{0, 0, 0, 8, 0x12, 0x34, 0x56, 0x78}, false},
		{"length below minimum", []byte{0, 0, 0, 3, 0, 3, 0, 0}, false},
		{"2 GB startup length", append(huge, 0, 3, 0, 0), false},
		{"truncated startup packet", startupPacket("user", appUser, "database", appDB)[:15], true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write(tc.payload); err != nil {
				t.Fatalf("write: %v", err)
			}
			if tc.hangUp {
				_ = conn.Close()
				// Nothing to read; the pooler must just clean up.
			} else {
				wantErrorOrClose(t, tc.name, readUntilClose(t, conn, 5*time.Second))
			}
			p.Alive(t)
			selectOne(t, p.App())
			if n := queryInt(t, bystander, "SELECT 11"); n != 11 {
				t.Fatalf("bystander: %d", n)
			}
		})
	}

	t.Run("2 GB message after login", func(t *testing.T) {
		pc, err := pgconn.Connect(ctxT(t, 10*time.Second), p.App())
		if err != nil {
			t.Fatal(err)
		}
		raw := pc.Conn()
		defer raw.Close()
		if _, err := raw.Write(append([]byte{'Q'}, huge...)); err != nil {
			t.Fatal(err)
		}
		wantErrorOrClose(t, "2 GB Query header", readUntilClose(t, raw, 5*time.Second))
		p.Alive(t)
		selectOne(t, p.App())
	})

	t.Run("unknown startup parameter", func(t *testing.T) {
		cfg := pgxConfig(t, p.App())
		cfg.RuntimeParams["foo"] = "bar"
		_, err := tryConnectPgx(t, cfg)
		wantPgError(t, err, "FATAL", "08P01", "unsupported startup parameter: foo")
		selectOne(t, p.App())
	})

	if n := queryInt(t, bystander, "SELECT 12"); n != 12 {
		t.Fatalf("bystander at the end: %d", n)
	}
	p.Alive(t)
}

package wire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/jackc/pgx/v5/pgproto3"
)

func FuzzReadStartup(f *testing.F) {
	f.Add(AppendStartup(nil, []Param{{"user", "u"}, {"database", "d"}}))
	f.Add(AppendStartup(nil, nil))
	f.Add(AppendCancelRequest(nil, []byte{1, 2, 3, 4, 5, 6, 7, 8}))
	ssl, _ := (&pgproto3.SSLRequest{}).Encode(nil)
	gss, _ := (&pgproto3.GSSEncRequest{}).Encode(nil)
	f.Add(ssl)
	f.Add(gss)
	f.Add(packet(3<<16|2, "user\x00u\x00_pq_.x\x00y\x00\x00"))
	f.Add(packet(2<<16, ""))
	f.Add(packet(3<<16, "user\x00u\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ReadStartup(bytes.NewReader(data))
		if err != nil {
			if s != nil {
				t.Fatalf("error %v with a result", err)
			}
			return
		}
		n := int(uint32(data[0])<<24 | uint32(data[1])<<16 | uint32(data[2])<<8 | uint32(data[3]))
		if n < 8 || n > maxStartupPacketSize || n > len(data) {
			t.Fatalf("accepted a packet with length %d (%d bytes available)", n, len(data))
		}
		switch s.Kind {
		case SSLRequest, GSSENCRequest:
		case CancelRequest:
			if n != 16 || !bytes.Equal(s.CancelKey[:], data[8:16]) {
				t.Fatalf("cancel key %x from %x", s.CancelKey, data[:n])
			}
		case StartupMessage:
			if s.Major != 3 {
				t.Fatalf("accepted protocol %d.%d", s.Major, s.Minor)
			}
			// A valid result re-encodes to the same bytes (minor aside).
			re := AppendStartup(nil, s.Params)
			if !bytes.Equal(re[8:], data[8:n]) || len(re) != n {
				t.Fatalf("params %q re-encode to %q, input %q", s.Params, re, data[:n])
			}
			for _, p := range s.Params {
				if p.Name == "" || strings.IndexByte(p.Name, 0) >= 0 || strings.IndexByte(p.Value, 0) >= 0 {
					t.Fatalf("bad param %q", p)
				}
			}
		default:
			t.Fatalf("kind %d", s.Kind)
		}
		// Reading byte by byte gives the same answer.
		s2, err := ReadStartup(iotest.OneByteReader(bytes.NewReader(data)))
		if err != nil || s2.Kind != s.Kind || len(s2.Params) != len(s.Params) {
			t.Fatalf("one-byte reads: %+v %v", s2, err)
		}
	})
}

// FuzzReader drives an arbitrary byte stream through Next and, chosen by the
// fuzzer, Body, Message, Forward, Skip, Peek, ReadBody, ReadBodyMax or
// ForwardBodyFrom, with a small buffer, a size limit, a body Budget and
// random read sizes. It must never panic or spin, everything forwarded must
// be exactly the input, and the budget is never overdrawn nor kept.
func FuzzReader(f *testing.F) {
	f.Add(encodeAll(sampleMsgs()[:9]), []byte{0, 1, 2, 3, 4, 5, 6}, uint16(200))
	f.Add(selectResponse(3), []byte{2, 2, 2}, uint16(0))
	f.Add([]byte{'D', 0, 0, 0, 2}, []byte{0}, uint16(0))
	f.Add(append(frame('d', pattern(500, 1)), 'Z', 0, 0), []byte{2, 5, 3}, uint16(1000))
	f.Fuzz(func(t *testing.T, stream, ops []byte, maxLen uint16) {
		if len(ops) == 0 {
			ops = []byte{0}
		}
		rd := newChunkReader(stream, uint64(len(ops))*31+uint64(maxLen), 17)
		r := NewReader(rd, 64)
		r.SetMaxMessageSize(int(maxLen))
		const budgetLimit = 1000
		budget := NewBudget(budgetLimit)
		r.SetBudget(budget)
		defer func() {
			r.Release()
			if budget.InUse() != 0 {
				t.Fatalf("budget: %d in use after Release", budget.InUse())
			}
		}()
		var out bytes.Buffer
		w := NewWriter(&out, 64)
		var scratch []byte
		pos := 0 // stream offset of the current message
		for i := 0; ; i++ {
			if i > len(stream)+1 {
				t.Fatalf("%d messages from %d bytes", i, len(stream))
			}
			typ, n, err := r.Next()
			if err != nil {
				if err == io.EOF && pos != len(stream) {
					t.Fatalf("io.EOF at %d of %d", pos, len(stream))
				}
				if maxLen > 0 && errors.Is(err, ErrMessageTooLarge) && pos+5 <= len(stream) {
					l := int(stream[pos+1])<<24 | int(stream[pos+2])<<16 | int(stream[pos+3])<<8 | int(stream[pos+4])
					if l+1 <= int(maxLen) {
						t.Fatalf("length %d rejected with max %d", l, maxLen)
					}
				}
				return
			}
			if typ != stream[pos] || (maxLen > 0 && n+5 > int(maxLen)) {
				t.Fatalf("Next = %q %d at %d", typ, n, pos)
			}
			end := pos + 5 + n
			var want []byte
			if end <= len(stream) {
				want = stream[pos:end]
			}
			if budget.InUse() != 0 {
				t.Fatalf("budget: %d in use after Next", budget.InUse())
			}
			op := ops[i%len(ops)] % 8
			switch op {
			case 0, 1: // Body / Message
				var b []byte
				if op == 0 {
					b, err = r.Body()
				} else {
					b, err = r.Message()
				}
				if errors.Is(err, ErrMessageTooLarge) {
					if r.Fits() {
						t.Fatal("ErrMessageTooLarge for a message that fits")
					}
					err = r.Skip()
				} else if err == nil {
					if op == 0 && !bytes.Equal(b, want[5:]) || op == 1 && !bytes.Equal(b, want) {
						t.Fatalf("body mismatch at %d", pos)
					}
				}
			case 2, 3: // Forward / Skip
				if op == 3 {
					err = r.Skip()
					break
				}
				out.Reset()
				err = r.Forward(w)
				if err == nil {
					w.Flush()
					if !bytes.Equal(out.Bytes(), want) {
						t.Fatalf("forwarded %d bytes, want %d", out.Len(), len(want))
					}
				}
			case 4: // Peek then Forward
				var p []byte
				p, err = r.Peek(int(ops[0]))
				if err == nil {
					// Peek may succeed on a truncated message: compare with
					// what the stream holds.
					if len(p) > n || pos+5+len(p) > len(stream) || !bytes.Equal(p, stream[pos+5:pos+5+len(p)]) {
						t.Fatalf("Peek mismatch at %d", pos)
					}
					err = r.Skip()
				}
			case 5, 7: // ReadBody, ReadBodyMax
				var b []byte
				limit := int(ops[0]) * 4
				if op == 5 {
					b, err = r.ReadBody(scratch)
				} else {
					b, err = r.ReadBodyMax(scratch, limit)
				}
				if errors.Is(err, ErrBudgetExceeded) && n > budgetLimit ||
					op == 7 && errors.Is(err, ErrMessageTooLarge) && n > limit {
					err = r.Skip()
					break
				}
				if budget.InUse() > budgetLimit {
					t.Fatalf("budget overdrawn: %d", budget.InUse())
				}
				if err == nil {
					if !bytes.Equal(b, want[5:]) {
						t.Fatalf("ReadBody mismatch at %d", pos)
					}
					scratch = b[:0]
				}
			case 6: // ForwardBodyFrom
				skip := min(int(ops[0]), n)
				out.Reset()
				err = r.ForwardBodyFrom(w, skip)
				if err == nil {
					w.Flush()
					if !bytes.Equal(out.Bytes(), want[5+skip:]) {
						t.Fatalf("ForwardBodyFrom mismatch at %d", pos)
					}
				}
			}
			if err != nil {
				if end <= len(stream) {
					t.Fatalf("op %d: %v for a complete message", op, err)
				}
				if err != io.ErrUnexpectedEOF {
					t.Fatalf("op %d: truncated message: err = %v, want io.ErrUnexpectedEOF", op, err)
				}
				return
			}
			if end > len(stream) {
				t.Fatalf("op %d succeeded on a truncated message", op)
			}
			pos = end
		}
	})
}

func FuzzParseErrorResponse(f *testing.F) {
	f.Add(AppendErrorResponse(nil, 'E', "FATAL", "08P01", "msg", "detail", "hint")[5:])
	pe, _ := (&pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "42601", Message: "syntax error", Position: 3, File: "scan.l", Line: 1, Routine: "scanner_yyerror"}).Encode(nil)
	f.Add(pe[5:])
	f.Add([]byte{0})
	f.Add([]byte("SERROR"))
	f.Fuzz(func(t *testing.T, body []byte) {
		fields, err := ParseErrorResponse(body)
		var pg pgproto3.ErrorResponse
		pgErr := pg.Decode(body)
		if err != nil {
			return
		}
		// Whatever we accept is well formed: pgproto3 agrees on the fields.
		if pgErr != nil {
			t.Fatalf("we accepted %q, pgproto3: %v", body, pgErr)
		}
		sev := pg.SeverityUnlocalized
		if sev == "" {
			sev = pg.Severity
		}
		// (An empty V still wins over S for us; pgproto3 cannot tell.)
		sevOK := fields.Severity == sev || pg.SeverityUnlocalized == "" && fields.Severity == ""
		if !sevOK || fields.Code != pg.Code || fields.Message != pg.Message || fields.Detail != pg.Detail || fields.Hint != pg.Hint {
			t.Fatalf("fields %+v, pgproto3 %+v", fields, pg)
		}
		// Re-encoding what we understood decodes back to the same fields.
		if fields.Severity != "" && !strings.ContainsRune(fields.Severity+fields.Code+fields.Message+fields.Detail+fields.Hint, 0) {
			re := AppendErrorResponse(nil, 'E', fields.Severity, fields.Code, fields.Message, fields.Detail, fields.Hint)
			back, err := ParseErrorResponse(re[5:])
			if err != nil || back != fields {
				t.Fatalf("re-encode: %+v %v, want %+v", back, err, fields)
			}
		}
	})
}

package wire

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// selectResponse is what Postgres answers to a small SELECT: RowDescription,
// rows DataRows, CommandComplete and ReadyForQuery.
func selectResponse(rows int) []byte {
	var b []byte
	b, _ = (&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{
		{Name: []byte("id"), DataTypeOID: 23, DataTypeSize: 4, TypeModifier: -1},
		{Name: []byte("name"), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1},
	}}).Encode(b)
	for i := range rows {
		b, _ = (&pgproto3.DataRow{Values: [][]byte{fmt.Appendf(nil, "%d", i), fmt.Appendf(nil, "user number %d", i)}}).Encode(b)
	}
	b, _ = (&pgproto3.CommandComplete{CommandTag: fmt.Appendf(nil, "SELECT %d", rows)}).Encode(b)
	b, _ = (&pgproto3.ReadyForQuery{TxStatus: 'I'}).Encode(b)
	return b
}

// relayOne relays messages until ReadyForQuery, flushing whenever the
// reader has nothing buffered, as the pooler's server→client pump does.
func relayOne(r *Reader, w *Writer) error {
	for {
		typ, _, err := r.Next()
		if err != nil {
			return err
		}
		if err := r.Forward(w); err != nil {
			return err
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
		if typ == MsgReadyForQuery {
			return nil
		}
	}
}

func TestRelayMatchesInput(t *testing.T) {
	resp := selectResponse(50)
	var out bytes.Buffer
	r := NewReader(&replayReader{data: resp}, 256)
	w := NewWriter(&out, 256)
	for range 3 {
		if err := relayOne(r, w); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	if !bytes.Equal(out.Bytes(), bytes.Repeat(resp, 3)) {
		t.Fatal("relayed bytes differ from the input")
	}
}

func TestRelayZeroAllocs(t *testing.T) {
	for _, size := range []int{256, DefaultBufferSize} {
		resp := selectResponse(20)
		d := &discard{}
		r := NewReader(&replayReader{data: resp}, size)
		w := NewWriter(d, size)
		allocs := testing.AllocsPerRun(200, func() {
			if err := relayOne(r, w); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Fatalf("buffer %d: %.1f allocations per relayed response, want 0", size, allocs)
		}
		if d.n == 0 {
			t.Fatal("nothing relayed")
		}
		// Decoding the messages the pooler looks at stays allocation-free too.
		allocs = testing.AllocsPerRun(200, func() {
			for {
				typ, _, err := r.Next()
				if err != nil {
					t.Fatal(err)
				}
				switch typ {
				case MsgReadyForQuery:
					b, _ := r.Body()
					if st, err := ReadyForQueryStatus(b); err != nil || st != TxIdle {
						t.Fatal(st, err)
					}
					return
				case MsgCommandComplete:
					b, _ := r.Body()
					if len(CommandTag(b)) == 0 {
						t.Fatal("empty tag")
					}
				default:
					if err := r.Forward(w); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
		if allocs != 0 {
			t.Fatalf("buffer %d: %.1f allocations decoding Z/C, want 0", size, allocs)
		}
	}
}

func TestLargeMessageRelayZeroAllocs(t *testing.T) {
	// Streaming a message bigger than both buffers allocates nothing either.
	resp := append(frame('d', pattern(100000, 2)), AppendReadyForQuery(nil, TxIdle)...)
	r := NewReader(&replayReader{data: resp}, 1024)
	w := NewWriter(&discard{}, 1024)
	if a := testing.AllocsPerRun(50, func() {
		if err := relayOne(r, w); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("%.1f allocations, want 0", a)
	}
}

func BenchmarkRelay(b *testing.B) {
	for _, rows := range []int{1, 20, 1000} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			resp := selectResponse(rows)
			r := NewReader(&replayReader{data: resp}, DefaultBufferSize)
			w := NewWriter(&discard{}, DefaultBufferSize)
			b.ReportAllocs()
			b.SetBytes(int64(len(resp)))
			for b.Loop() {
				if err := relayOne(r, w); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRelayLargeMessage(b *testing.B) {
	resp := append(frame('d', pattern(1<<20, 2)), AppendReadyForQuery(nil, TxIdle)...)
	r := NewReader(&replayReader{data: resp}, DefaultBufferSize)
	w := NewWriter(&discard{}, DefaultBufferSize)
	b.ReportAllocs()
	b.SetBytes(int64(len(resp)))
	for b.Loop() {
		if err := relayOne(r, w); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadStartup(b *testing.B) {
	pkt := AppendStartup(nil, []Param{{"user", "app"}, {"database", "appdb"}, {"application_name", "psql"}, {"client_encoding", "UTF8"}})
	rd := bytes.NewReader(pkt)
	b.ReportAllocs()
	b.SetBytes(int64(len(pkt)))
	for b.Loop() {
		rd.Reset(pkt)
		if _, err := ReadStartup(rd); err != nil {
			b.Fatal(err)
		}
	}
}

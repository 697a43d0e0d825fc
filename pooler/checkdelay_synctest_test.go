package pooler

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"testing/synctest"
)

// server_check_delay = 0 checks a server on every reuse, as PgBouncer ("If
// 0 then the check is always run"); it does not turn the check off. A
// server fresh from its login is not checked (the login just proved it),
// but the rig's one server was first used for the client's welcome, so
// each of the three transactions reuses it. An empty server_check_query
// turns the check off.
func TestTimingServerCheckDelayZeroChecksEveryReuse(t *testing.T) {
	for _, tc := range []struct {
		name, settings string
		want           int
	}{
		{"delay 0", "server_check_query = SELECT 'alive'\n", 3},
		{"empty check query", "server_check_query =\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &writeRecorder{}
				r := startTimingRig(t, "pool_mode = transaction\nserver_check_delay = 0\n"+tc.settings, func(s *Service) {
					pgDial := s.dial
					s.dial = func(ctx context.Context, network, address string) (net.Conn, error) {
						c, err := pgDial(ctx, network, address)
						if err != nil {
							return nil, err
						}
						return &recordingConn{Conn: c, rec: rec}, nil
					}
				})
				c := r.connect("u", nil)
				for _, q := range []string{"SELECT 1", "SELECT 2", "SELECT 3"} {
					if rep := c.query(q); !rep.ready || rep.err != nil {
						t.Fatalf("%s: %v", q, rep)
					}
				}
				check := append([]byte{'Q', 0, 0, 0, byte(4 + len("SELECT 'alive'") + 1)}, "SELECT 'alive'\x00"...)
				if n := rec.count(check); n != tc.want {
					t.Errorf("the check query was sent %d times for three transactions; want %d", n, tc.want)
				}
				if n := r.pg.logins(); n != 1 {
					t.Errorf("%d server logins; want 1", n)
				}
			})
		})
	}
}

// writeRecorder keeps everything the pooler wrote to its servers.
type writeRecorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *writeRecorder) count(b []byte) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Count(w.buf.Bytes(), b)
}

type recordingConn struct {
	net.Conn
	rec *writeRecorder
}

func (c *recordingConn) Write(b []byte) (int, error) {
	c.rec.mu.Lock()
	c.rec.buf.Write(b)
	c.rec.mu.Unlock()
	return c.Conn.Write(b)
}

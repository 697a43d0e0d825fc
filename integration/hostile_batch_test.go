//go:build linux

package integration

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestRefusedFrameAfterABatch: a batch and a frame the pooler refuses,
// read together. The batch reaches the server (the refusal does not leave
// it in the pooler's write buffer), so the drain finds the replies it
// waits for, rolls back and returns the server to the pool instead of
// timing out and closing it. Found by FuzzSession.
//
// BEGIN leaves the link open, so a pump goroutine relays the server's
// replies while serve reads the client: the SELECT's replies and the
// FATAL race, and either order is right.
func TestRefusedFrameAfterABatch(t *testing.T) {
	needPG(t)
	waitNoBackends(t, otherDB, appUser)
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "1", "auth_type": "trust"}, ""), testUserlist)
	connstr := p.ConnString(otherDB, appUser, appPassword)
	fillPool(t, connstr, 1)
	before := idleBackends(t, otherDB, appUser)

	frames := []struct {
		name  string
		frame []byte
	}{
		{"unknown type", message('Z', []byte{'I'})},
		{"length below 4", []byte{'Q', 0, 0, 0, 3}},
	}
	for _, f := range frames {
		t.Run(f.name, func(t *testing.T) {
			conn, err := rawSession(p, otherDB, appUser)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if st, err := rawQuery(conn, "BEGIN"); err != nil || st != 'T' {
				t.Fatalf("BEGIN: %q %v", st, err)
			}
			q, _ := (&pgproto3.Query{String: "SELECT 1"}).Encode(nil)
			if _, err := conn.Write(append(q, f.frame...)); err != nil {
				t.Fatal(err)
			}
			// The link's pump may relay the SELECT's replies (all or
			// some) before serve refuses the frame after it: as from
			// PostgreSQL, which answers the query before it reads on.
			fields, err := fatalThenCloseAfter(conn, 10*time.Second, "TDCZ")
			if err != nil {
				t.Fatal(err)
			}
			if fields['S'] != "FATAL" || fields['C'] != "08P01" {
				t.Fatalf("got %v, want FATAL 08P01", fields)
			}
		})
	}
	// The same backend serves on: it was drained, not closed.
	after := idleBackends(t, otherDB, appUser)
	for pid := range before {
		if !after[pid] {
			t.Errorf("backend %d was closed (before %v, after %v)", pid, before, after)
		}
	}
	selectOne(t, connstr)
}

//go:build linux

package integration

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// largeSizes are statement lengths around and far beyond the pooler's
// buffers (4 KiB client reads, 16 KiB writes), up to one far larger than
// any statement the pooler holds cheaply.
var largeSizes = []int{4<<10 + 1, 16<<10 + 1, 100 << 10, 1 << 20, 10 << 20}

// largeSQL is a statement of about n bytes whose answer is n.
func largeSQL(n int, param string) string {
	return "SELECT " + param + "::int, length('" + strings.Repeat("x", n) + "')"
}

// TestLargeStatementsAfterASmallOne: each driver sends a small statement,
// then statements larger than every buffer of the pooler; Postgres must
// see each one byte for byte (it counts the literal). A message larger
// than the read buffer once came out mangled after a smaller one, because
// a slice of the read buffer was reused as scratch (issue 15).
func TestLargeStatementsAfterASmallOne(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "4"}, ""), testUserlist)

	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		t.Run("pgx/"+mode.String(), func(t *testing.T) {
			cfg := pgxConfig(t, p.App())
			cfg.DefaultQueryExecMode = mode
			conn, err := tryConnectPgx(t, cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := ctxT(t, 60*time.Second)
			defer conn.Close(ctx)
			var one int
			if err := conn.QueryRow(ctx, "SELECT $1::int", 1).Scan(&one); err != nil || one != 1 {
				t.Fatalf("small statement: %d, %v", one, err)
			}
			for _, n := range largeSizes {
				var a, got int
				if err := conn.QueryRow(ctx, largeSQL(n, "$1"), 7).Scan(&a, &got); err != nil {
					t.Fatalf("%d bytes: %v", n, err)
				}
				if a != 7 || got != n {
					t.Fatalf("%d bytes: got (%d, %d), want (7, %d)", n, a, got, n)
				}
			}
		})
	}

	t.Run("lib/pq", func(t *testing.T) {
		db := connectPq(t, p.App())
		var one int
		if err := db.QueryRow("SELECT $1::int", 1).Scan(&one); err != nil || one != 1 {
			t.Fatalf("small statement: %d, %v", one, err)
		}
		for _, n := range largeSizes {
			var a, got int
			if err := db.QueryRow(largeSQL(n, "$1"), 7).Scan(&a, &got); err != nil {
				t.Fatalf("%d bytes: %v", n, err)
			}
			if a != 7 || got != n {
				t.Fatalf("%d bytes: got (%d, %d), want (7, %d)", n, a, got, n)
			}
		}
		// A prepared statement object: a named Parse.
		for _, n := range largeSizes[:3] {
			stmt, err := db.Prepare(largeSQL(n, "$1"))
			if err != nil {
				t.Fatalf("prepare %d bytes: %v", n, err)
			}
			var a, got int
			err = stmt.QueryRow(9).Scan(&a, &got)
			stmt.Close()
			if err != nil || a != 9 || got != n {
				t.Fatalf("prepared %d bytes: (%d, %d), %v", n, a, got, err)
			}
		}
	})

	t.Run("pgproto3", func(t *testing.T) {
		// A raw client: named and unnamed Parse, Describe and Close of the
		// large statement, and a simple Query, each after a small one,
		// in one pipeline per size.
		fe, _ := rawLogin(t, p.App())
		for i, n := range largeSizes {
			name := fmt.Sprintf("big_%d", i)
			fe.Send(&pgproto3.Parse{Name: "small", Query: "SELECT $1::int"})
			fe.Send(&pgproto3.Parse{Name: name, Query: largeSQL(n, "$1")})
			fe.Send(&pgproto3.Describe{ObjectType: 'S', Name: name})
			fe.Send(&pgproto3.Bind{PreparedStatement: name, Parameters: [][]byte{[]byte("3")}})
			fe.Send(&pgproto3.Execute{})
			fe.Send(&pgproto3.Close{ObjectType: 'S', Name: name})
			fe.Send(&pgproto3.Close{ObjectType: 'S', Name: "small"})
			fe.Send(&pgproto3.Parse{Query: largeSQL(n, "$1")})
			fe.Send(&pgproto3.Bind{Parameters: [][]byte{[]byte("4")}})
			fe.Send(&pgproto3.Execute{})
			fe.Send(&pgproto3.Sync{})
			fe.Send(&pgproto3.Query{String: "SELECT 1, length('" + strings.Repeat("y", n) + "')"})
			if err := fe.Flush(); err != nil {
				t.Fatal(err)
			}
			var rows []string
			for ready := 0; ready < 2; {
				msg, err := fe.Receive()
				if err != nil {
					t.Fatalf("%d bytes: %v", n, err)
				}
				switch m := msg.(type) {
				case *pgproto3.DataRow:
					rows = append(rows, string(m.Values[0])+","+string(m.Values[1]))
				case *pgproto3.ErrorResponse:
					t.Fatalf("%d bytes: %s %s", n, m.Code, m.Message)
				case *pgproto3.ReadyForQuery:
					ready++
				}
			}
			want := []string{fmt.Sprintf("3,%d", n), fmt.Sprintf("4,%d", n), fmt.Sprintf("1,%d", n)}
			if strings.Join(rows, " ") != strings.Join(want, " ") {
				t.Fatalf("%d bytes: rows %q, want %q", n, rows, want)
			}
		}
	})
}

// rawLogin logs in with pgconn (which speaks SCRAM) and takes the
// connection over, so the test writes and reads raw protocol messages.
func rawLogin(t testing.TB, connstr string) (*pgproto3.Frontend, net.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pc, err := pgconn.Connect(ctx, connstr)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := pc.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hc.Conn.Close() })
	hc.Conn.SetDeadline(time.Now().Add(60 * time.Second))
	return hc.Frontend, hc.Conn
}

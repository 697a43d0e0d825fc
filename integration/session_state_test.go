//go:build linux

package integration

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Session state works in session mode: WITH HOLD cursors, session advisory
// locks and temp tables live across transactions on the client's server.
func TestSessionModeSessionState(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{"pool_mode": "session", "default_pool_size": "2"}, ""), testUserlist)
	ctx := ctxT(t, 20*time.Second)
	c := connectPgx(t, p.App())
	for _, q := range []string{
		"CREATE TEMP TABLE sess_tmp AS SELECT g FROM generate_series(1, 5) g",
		"SELECT pg_advisory_lock(4242)",
		"BEGIN",
		"DECLARE held CURSOR WITH HOLD FOR SELECT g FROM sess_tmp ORDER BY g",
		"COMMIT",
	} {
		if _, err := c.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// Other clients come and go in between.
	for i := 0; i < 3; i++ {
		selectOne(t, p.App())
	}
	if n := queryInt(t, c, "SELECT count(*) FROM sess_tmp"); n != 5 {
		t.Fatalf("temp table rows %d", n)
	}
	var g int
	if err := c.QueryRow(ctx, "FETCH NEXT FROM held", pgx.QueryExecModeSimpleProtocol).Scan(&g); err != nil || g != 1 {
		t.Fatalf("WITH HOLD cursor: %d %v", g, err)
	}
	if n := queryInt(t, c, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND pid = pg_backend_pid()"); n != 1 {
		t.Fatalf("advisory lock held: %d", n)
	}
}

// COPY in every pool mode, a client that aborts with CopyFail, and COPY
// through the extended protocol.
func TestCopyModesAndCopyFail(t *testing.T) {
	needPG(t)
	for _, mode := range []string{"session", "transaction", "statement"} {
		t.Run(mode, func(t *testing.T) {
			p := startPooler(t, iniSettings(map[string]string{"pool_mode": mode, "default_pool_size": "1"}, ""), testUserlist)
			ctx := ctxT(t, 20*time.Second)
			c, err := pgconn.Connect(ctx, p.App())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			tbl := "copy_" + mode
			if _, err := c.Exec(ctx, "DROP TABLE IF EXISTS "+tbl+"; CREATE TABLE "+tbl+" (id int, v text)").ReadAll(); err != nil {
				t.Fatal(err)
			}
			tag, err := c.CopyFrom(ctx, strings.NewReader(copyRows(1000)), "COPY "+tbl+" FROM STDIN")
			if err != nil || tag.RowsAffected() != 1000 {
				t.Fatalf("copy in: %v %v", tag, err)
			}
			var out strings.Builder
			tag, err = c.CopyTo(ctx, &out, "COPY (SELECT * FROM "+tbl+" ORDER BY id) TO STDOUT")
			if err != nil || tag.RowsAffected() != 1000 || out.String() != copyRows(1000) {
				t.Fatalf("copy out: %v %v, %d bytes", tag, err, out.Len())
			}
			// CopyFail: the client aborts halfway.
			_, err = c.CopyFrom(ctx, io.MultiReader(strings.NewReader(copyRows(10)), failingReader{}), "COPY "+tbl+" FROM STDIN")
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "57014" {
				t.Fatalf("CopyFail: want 57014, got %v", err)
			}
			res, err := c.Exec(ctx, "SELECT count(*) FROM "+tbl).ReadAll()
			if err != nil || string(res[0].Rows[0][0]) != "1000" {
				t.Fatalf("after CopyFail: %v %v", res, err)
			}
		})
	}
	// Extended-protocol COPY: COPY TO STDOUT as a prepared statement.
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "1"}, ""), testUserlist)
	ctx := ctxT(t, 20*time.Second)
	c, err := pgconn.Connect(ctx, p.App())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rr := c.ExecParams(ctx, "COPY (SELECT 1) TO STDOUT", nil, nil, nil, nil)
	res := rr.Read()
	if res.Err != nil || res.CommandTag.String() != "COPY 1" {
		t.Fatalf("extended COPY: %v %v", res.CommandTag, res.Err)
	}
	if r, err := c.Exec(ctx, "SELECT 'still fine'").ReadAll(); err != nil || string(r[0].Rows[0][0]) != "still fine" {
		t.Fatalf("after extended COPY: %v", err)
	}
}

// copyRows is n rows of COPY text format for (id int, v text).
func copyRows(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%d\tvalue %d\n", i, i*7)
	}
	return b.String()
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("client gave up") }

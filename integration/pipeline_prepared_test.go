//go:build linux

package integration

import (
	"context"
	"testing"
	"time"
)

// TestPipelineSkippedParseIsPreparedLater: in a pipeline, after a Parse
// fails, Postgres skips the rest up to the Sync, Parses included. As in
// PgBouncer, the client keeps the names of the failed and the skipped
// Parses, and a later execution of one prepares it on the server then
// (issue 18, cause 17: psycopg's pipeline mode binds them, and got
// "prepared statement does not exist"); the failed one runs once what it
// lacked exists.
func TestPipelineSkippedParseIsPreparedLater(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{"max_prepared_statements": "100"}, ""), testUserlist)
	pc := connectPgconn(t, p.App())
	ctx := ctxT(t, 10*time.Second)

	pl := pc.StartPipeline(ctx)
	pl.SendPrepare("ok0", "SELECT 0", nil)
	pl.SendPrepare("bad1", "SELECT * FROM pipeline_no_such_table", nil)
	pl.SendPrepare("skipped2", "SELECT 2", nil)
	if err := pl.Sync(); err != nil {
		t.Fatal(err)
	}
	if pe := asPgError(t, pl.Close()); pe.Code != "42P01" {
		t.Fatalf("the pipeline: %s %s, want 42P01", pe.Code, pe.Message)
	}

	for name, want := range map[string]string{"ok0": "0", "skipped2": "2"} {
		res := pc.ExecPrepared(ctx, name, nil, nil, nil).Read()
		if res.Err != nil || len(res.Rows) != 1 || string(res.Rows[0][0]) != want {
			t.Errorf("execute %s: rows %q, err %v; want %s", name, res.Rows, res.Err, want)
		}
	}
	res := pc.ExecPrepared(ctx, "bad1", nil, nil, nil).Read()
	if pe := asPgError(t, res.Err); pe.Code != "42P01" {
		t.Errorf("execute the failed bad1: %s %s, want 42P01 again", pe.Code, pe.Message)
	}
	if _, err := pc.Exec(ctx, "CREATE TABLE pipeline_no_such_table (a int); INSERT INTO pipeline_no_such_table VALUES (7)").ReadAll(); err != nil {
		t.Fatal(err)
	}
	defer func() { pc.Exec(context.Background(), "DROP TABLE pipeline_no_such_table").ReadAll() }()
	res = pc.ExecPrepared(ctx, "bad1", nil, nil, nil).Read()
	if res.Err != nil || len(res.Rows) != 1 || string(res.Rows[0][0]) != "7" {
		t.Errorf("execute bad1 once its table exists: rows %q, err %v; want 7", res.Rows, res.Err)
	}
}

package shard

import "testing"

func TestReadTxControl(t *testing.T) {
	for _, c := range []struct {
		sql   string
		kind  TxControl
		start bool
	}{
		{"BEGIN", TxBegin, false},
		{"begin;", TxBegin, false},
		{"  Begin Work ", TxBegin, false},
		{"BEGIN TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ ONLY, DEFERRABLE", TxBegin, false},
		{"begin isolation level repeatable read read write not deferrable", TxBegin, false},
		{"START TRANSACTION", TxBegin, true},
		{"start transaction isolation level read committed;", TxBegin, true},
		{"/* app */ BEGIN -- x\n", TxBegin, false},
		{"COMMIT", TxCommit, false},
		{"end transaction", TxCommit, false},
		{"commit and no chain", TxCommit, false},
		{"ROLLBACK", TxRollback, false},
		{"abort work;", TxRollback, false},
		{"SAVEPOINT a", TxSavepoint, false},
		{"savepoint \"A b\";", TxSavepoint, false},
		{"RELEASE SAVEPOINT a", TxRelease, false},
		{"release a", TxRelease, false},
		{"ROLLBACK TO SAVEPOINT a", TxRollbackTo, false},
		{"rollback work to a", TxRollbackTo, false},
		{"SET LOCAL statement_timeout = '5s'", TxSetLocal, false},
		{"set transaction isolation level serializable", TxSetLocal, false},
		// What is not answered by the pooler.
		{"COMMIT AND CHAIN", TxNone, false},
		{"ROLLBACK TO", TxNone, false},
		{"SAVEPOINT", TxNone, false},
		{"SAVEPOINT a b", TxNone, false},
		{"SET LOCAL", TxNone, false},
		{"SET search_path = x", TxNone, false},
		{"SET LOCAL a = 1; DROP TABLE t", TxNone, false},
		{"SET LOCAL a = ';'", TxSetLocal, false},
		{"BEGIN ISOLATION LEVEL SNAPSHOT", TxNone, false},
		{"BEGIN; SELECT 1", TxNone, false},
		{"BEGIN READ", TxNone, false},
		{"START", TxNone, false},
		{"'BEGIN'", TxNone, false},
		{"BEGIN 'x", TxNone, false},
		{"COMMIT PREPARED 'x'", TxNone, false},
		{"SELECT 1", TxNone, false},
		{"", TxNone, false},
	} {
		kind, start := ReadTxControl([]byte(c.sql))
		if kind != c.kind || start != c.start {
			t.Errorf("ReadTxControl(%q) = %v, %v; want %v, %v", c.sql, kind, start, c.kind, c.start)
		}
	}
}

// MaybeControl is true for every text ReadTxControl or ReadSet finds.
func TestMaybeControl(t *testing.T) {
	for sql, want := range map[string]bool{
		"SELECT 1": false, "  /* x */ -- y\n begin": true, "BEGIN": true, "set pgturnstile.shard_key = 1": true,
		"Reset x": true, "commit;": true, "END": true, "abort": true, "rollback to a": true, "savepoint a": true,
		"release a": true, "start transaction": true, "settle": false, "insert into t values (1)": false,
		"": false, "/* unclosed": false, "setx": false, "begin2": false,
	} {
		if got := MaybeControl([]byte(sql)); got != want {
			t.Errorf("MaybeControl(%q) = %v", sql, got)
		}
	}
}

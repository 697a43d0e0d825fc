// Package integration holds pgturnstile's end-to-end tests.
//
// TestMain (main_test.go) starts one throwaway PostgreSQL 15 for the whole
// package: initdb in a temp dir, run as the postgres OS user when the tests
// run as root, listening on 127.0.0.1 on a free port below 32768 with its
// unix socket in the temp dir. It creates purpose-named roles and databases:
//
//	app      SCRAM password 'app-secret'    owns appdb, otherdb
//	md5user  md5 password   'md5-secret'
//	bench    SCRAM password 'bench-secret'  owns benchdb
//
// Each test starts the real pooler binary (built once from ./cmd/pgturnstile,
// or taken from $PGTURNSTILE_BIN) with its own pgbouncer.ini and userlist.txt
// on 127.0.0.1:0, and talks to it with real clients: pgx v5, lib/pq, psql and
// pgbench. Assertions that count server connections read pg_stat_activity
// through a direct superuser connection over the unix socket.
//
// Run them with `go test ./integration` (they need /usr/lib/postgresql/15/bin
// and fail loudly without it); `go test -short` skips them. Set
// PGTURNSTILE_RACE=1 to build the pooler with -race, and PGTURNSTILE_KEEP=1 to
// keep the temp dir (Postgres log, pooler configs) for inspection.
//
// Linux only: the tests run PostgreSQL and the pooler as child processes
// (process groups, Pdeathsig, credentials), so every file has the build
// tag linux.
package integration

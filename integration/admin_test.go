//go:build linux

package integration

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The admin console's users: admin (admin_users) and stats (stats_users).
const (
	adminUser = "admin"
	adminPass = "admin-secret"
	statsUser = "stats"
	statsPass = "stats-secret"
)

// opsUserlist is testUserlist plus alice, bob and the console users.
var opsUserlist = testUserlist + fmt.Sprintf("%q %q\n%q %q\n%q %q\n%q %q\n",
	aliceUser, alicePass, bobUser, bobPass, adminUser, adminPass, statsUser, statsPass)

// withConsoleUsers adds admin_users and stats_users to settings.
func withConsoleUsers(settings map[string]string) map[string]string {
	s := map[string]string{"admin_users": adminUser, "stats_users": statsUser}
	for k, v := range settings {
		s[k] = v
	}
	return s
}

// consoleAs connects to the admin console (database pgbouncer) as user with
// the simple query protocol, the only one the console takes. notices, when
// not nil, receives every NOTICE.
func consoleAs(t testing.TB, p *Pooler, user, password string, notices func(*pgconn.Notice)) *pgx.Conn {
	t.Helper()
	cfg := pgxConfig(t, p.ConnString("pgbouncer", user, password))
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	if notices != nil {
		cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices(n) }
	}
	conn, err := tryConnectPgx(t, cfg)
	if err != nil {
		t.Fatalf("console login as %s: %v", user, err)
	}
	return conn
}

// adminConsole is consoleAs(admin).
func adminConsole(t testing.TB, p *Pooler) *pgx.Conn {
	t.Helper()
	return consoleAs(t, p, adminUser, adminPass, nil)
}

// nullText stands for SQL NULL in a showResult.
const nullText = "<NULL>"

// showResult is one console result set, every value as text.
type showResult struct {
	query string
	cols  []string
	rows  []map[string]string
}

func tryShow(conn *pgx.Conn, q string) (showResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := showResult{query: q}
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return res, err
	}
	defer rows.Close()
	for _, fd := range rows.FieldDescriptions() {
		res.cols = append(res.cols, fd.Name)
	}
	for rows.Next() {
		raw := rows.RawValues()
		row := make(map[string]string, len(raw))
		for i, v := range raw {
			if v == nil {
				row[res.cols[i]] = nullText
			} else {
				row[res.cols[i]] = string(v)
			}
		}
		res.rows = append(res.rows, row)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return res, err
	}
	if tag := rows.CommandTag().String(); tag != "SHOW" {
		return res, fmt.Errorf("%s: command tag %q, want SHOW", q, tag)
	}
	return res, nil
}

// show runs a SHOW on the console or fails the test.
func show(t testing.TB, conn *pgx.Conn, q string) showResult {
	t.Helper()
	res, err := tryShow(conn, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return res
}

// where returns the rows whose columns equal the given values
// (col1, val1, col2, val2, ...).
func (r showResult) where(kv ...string) []map[string]string {
	var out []map[string]string
	for _, row := range r.rows {
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			if row[kv[i]] != kv[i+1] {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, row)
		}
	}
	return out
}

// one returns the only row matching kv (see where) or fails the test.
func (r showResult) one(t testing.TB, kv ...string) map[string]string {
	t.Helper()
	rows := r.where(kv...)
	if len(rows) != 1 {
		t.Fatalf("%s: %d rows with %v, want 1; all rows:\n%s", r.query, len(rows), kv, r)
	}
	return rows[0]
}

// has reports whether a row matches kv.
func (r showResult) has(kv ...string) bool { return len(r.where(kv...)) > 0 }

func (r showResult) String() string {
	var b strings.Builder
	b.WriteString(strings.Join(r.cols, " | ") + "\n")
	for _, row := range r.rows {
		vals := make([]string, len(r.cols))
		for i, c := range r.cols {
			vals[i] = row[c]
		}
		b.WriteString(strings.Join(vals, " | ") + "\n")
	}
	return b.String()
}

// num parses row[col] as an integer (numeric columns print as integers).
func num(t testing.TB, row map[string]string, col string) int64 {
	t.Helper()
	v, ok := row[col]
	if !ok {
		t.Fatalf("no column %q in row %v", col, row)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		t.Fatalf("column %s = %q: not an integer", col, v)
	}
	return n
}

// wantCols asserts row's integer columns (col, value, col, value...).
func wantCols(t testing.TB, what string, row map[string]string, kv ...any) {
	t.Helper()
	for i := 0; i+1 < len(kv); i += 2 {
		col := kv[i].(string)
		switch want := kv[i+1].(type) {
		case int:
			if got := num(t, row, col); got != int64(want) {
				t.Errorf("%s: %s = %d, want %d (row %v)", what, col, got, want, row)
			}
		case string:
			if got := row[col]; got != want {
				t.Errorf("%s: %s = %q, want %q (row %v)", what, col, got, want, row)
			}
		default:
			t.Fatalf("wantCols: bad value type %T", want)
		}
	}
}

// adminExec runs one console command and returns its command tag.
func adminExec(t testing.TB, conn *pgx.Conn, q string) string {
	t.Helper()
	tag, err := conn.Exec(ctxT(t, 30*time.Second), q)
	if err != nil {
		t.Fatalf("console %q: %v", q, err)
	}
	return tag.String()
}

// adminExecErr runs one console command that must fail with ERROR code
// and message (message "" is not checked); the session must stay usable.
func adminExecErr(t testing.TB, conn *pgx.Conn, q, code, message string) *pgconn.PgError {
	t.Helper()
	_, err := conn.Exec(ctxT(t, 10*time.Second), q)
	if err == nil {
		t.Fatalf("console %q succeeded, want ERROR %s %q", q, code, message)
	}
	e := asPgError(t, err)
	if e.Severity != "ERROR" || e.Code != code || (message != "" && e.Message != message) {
		t.Fatalf("console %q: got %s %s %q, want ERROR %s %q", q, e.Severity, e.Code, e.Message, code, message)
	}
	return e
}

// poolRow polls SHOW POOLS until the (db, user) row satisfies ok, or fails.
func waitPool(t testing.TB, conn *pgx.Conn, db, user string, timeout time.Duration, what string, ok func(map[string]string) bool) map[string]string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		res := show(t, conn, "SHOW POOLS")
		rows := res.where("database", db, "user", user)
		if len(rows) == 1 && ok(rows[0]) {
			return rows[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("SHOW POOLS (%s, %s) not %s after %v:\n%s", db, user, what, timeout, res)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// goldenColumns reads testdata/admin/<name>.columns.
func goldenColumns(t testing.TB, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "admin", name+".columns"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// TestAdminShowColumns: every SHOW of PgBouncer 1.25 answers, on the live
// pooler, exactly the column list of its golden file; stats_users get the
// same lists (SHOW FDS aside, which is admin only).
func TestAdminShowColumns(t *testing.T) {
	p := startPooler(t, iniSettings(withConsoleUsers(nil), ""), opsUserlist)
	var notices []*pgconn.Notice
	var mu sync.Mutex
	admin := consoleAs(t, p, adminUser, adminPass, func(n *pgconn.Notice) { mu.Lock(); notices = append(notices, n); mu.Unlock() })
	stats := consoleAs(t, p, statsUser, statsPass, nil)

	files, err := filepath.Glob(filepath.Join("..", "testdata", "admin", "*.columns"))
	if err != nil || len(files) < 21 {
		t.Fatalf("golden files: %v (%d found, want the 21 SHOW subjects)", err, len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".columns")
		want := goldenColumns(t, name)
		q := "SHOW " + strings.ToUpper(name)
		got := show(t, admin, q)
		if !slices.Equal(got.cols, want) {
			t.Errorf("%s columns:\n got %v\nwant %v", q, got.cols, want)
		}
		if name == "fds" {
			adminExecErr(t, stats, q, "08P01", "admin access needed")
			continue
		}
		if got := show(t, stats, strings.ToLower(q)); !slices.Equal(got.cols, want) {
			t.Errorf("%s as stats user, columns:\n got %v\nwant %v", q, got.cols, want)
		}
	}

	// SHOW HELP: a NOTICE "Console usage" listing the commands, tag SHOW.
	if tag := adminExec(t, admin, "SHOW HELP"); tag != "SHOW" {
		t.Errorf("SHOW HELP tag %q", tag)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(notices) != 1 || notices[0].Message != "Console usage" ||
		!strings.Contains(notices[0].Detail, "SHOW HELP|CONFIG|DATABASES") ||
		!strings.Contains(notices[0].Detail, "SET USER <user> = 'args'") {
		t.Errorf("SHOW HELP notices: %+v", notices)
	}
}

// TestAdminShowValues checks each SHOW against a known state: a pool of 1
// held by an open transaction with 3 clients waiting for it.
func TestAdminShowValues(t *testing.T) {
	p := startPooler(t, iniSettings(withConsoleUsers(map[string]string{"default_pool_size": "1"}),
		"[users]\nbob = max_user_connections=7 pool_mode=session"), opsUserlist)
	admin := adminConsole(t, p)

	holderCfg := pgxConfig(t, p.App()+" application_name=holder")
	holder, err := tryConnectPgx(t, holderCfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 60*time.Second)
	if _, err := holder.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	holderPID := queryInt(t, holder, "SELECT pg_backend_pid()")

	waiters := make([]*pgx.Conn, 3)
	for i := range waiters {
		waiters[i] = connectPgx(t, p.App()+" application_name=waiter")
	}
	var wg sync.WaitGroup
	waitErrs := make(chan error, len(waiters))
	for _, w := range waiters {
		wg.Add(1)
		go func(w *pgx.Conn) {
			defer wg.Done()
			_, err := w.Exec(ctx, "SELECT 1")
			waitErrs <- err
		}(w)
	}

	pool := waitPool(t, admin, appDB, appUser, 5*time.Second, "cl_waiting=3", func(r map[string]string) bool { return r["cl_waiting"] == "3" })
	wantCols(t, "SHOW POOLS appdb/app", pool,
		"cl_active", 1, "cl_waiting", 3, "cl_active_cancel_req", 0, "cl_waiting_cancel_req", 0,
		"sv_active", 1, "sv_idle", 0, "sv_used", 0, "sv_tested", 0, "sv_login", 0,
		"pool_mode", "transaction", "pool_size", 1)
	if num(t, pool, "maxwait")*1_000_000+num(t, pool, "maxwait_us") <= 0 {
		t.Errorf("SHOW POOLS maxwait/maxwait_us = %s/%s with 3 clients waiting, want > 0", pool["maxwait"], pool["maxwait_us"])
	}
	// PgBouncer lists its admin pool too (forced user pgbouncer, statement
	// mode), with the console clients in cl_active.
	if pools := show(t, admin, "SHOW POOLS"); len(pools.where("database", "pgbouncer", "user", "pgbouncer")) != 1 {
		t.Errorf("SHOW POOLS has no pgbouncer/pgbouncer row (PgBouncer lists its admin pool):\n%s", pools)
	} else {
		wantCols(t, "SHOW POOLS pgbouncer", pools.one(t, "database", "pgbouncer", "user", "pgbouncer"), "pool_mode", "statement", "cl_active", 1)
	}

	// SHOW CLIENTS: the holder (active, linked), 3 waiting, and this console.
	clients := show(t, admin, "SHOW CLIENTS")
	if n := len(clients.where("database", appDB)); n != 4 {
		t.Errorf("SHOW CLIENTS: %d appdb clients, want 4:\n%s", n, clients)
	}
	h := clients.one(t, "database", appDB, "application_name", "holder")
	wantCols(t, "SHOW CLIENTS holder", h, "type", "C", "user", appUser, "state", "active",
		"addr", "127.0.0.1", "replication", "none", "tls", "", "close_needed", 0)
	if w := clients.where("database", appDB, "state", "waiting", "application_name", "waiter"); len(w) != 3 {
		t.Errorf("SHOW CLIENTS: %d waiting waiters, want 3:\n%s", len(w), clients)
	} else if w[0]["link"] != "" && w[0]["link"] != nullText {
		t.Errorf("a waiting client has link %q", w[0]["link"])
	}
	self := clients.one(t, "database", "pgbouncer")
	// The console client itself (1.25 calls a client without a server
	// "idle", so its state is not checked).
	wantCols(t, "SHOW CLIENTS console", self, "type", "C", "user", adminUser)

	// SHOW SERVERS: one active server, linked both ways with the holder.
	servers := show(t, admin, "SHOW SERVERS")
	srv := servers.one(t, "database", appDB)
	wantCols(t, "SHOW SERVERS", srv, "type", "S", "user", appUser, "state", "active",
		"addr", "127.0.0.1", "port", int(pg.port), "remote_pid", int(holderPID), "link", h["ptr"])
	if h["link"] != srv["ptr"] || srv["ptr"] == "" {
		t.Errorf("holder link %q, server ptr %q: want the same, non-empty", h["link"], srv["ptr"])
	}

	// SHOW SOCKETS: clients and servers with PgBouncer's list names.
	sockets := show(t, admin, "SHOW SOCKETS")
	for _, c := range []struct{ typ, state string }{{"C", "cl_active"}, {"C", "cl_waiting"}, {"S", "sv_active"}} {
		if !sockets.has("database", appDB, "type", c.typ, "state", c.state) {
			t.Errorf("SHOW SOCKETS has no %s %s row:\n%s", c.typ, c.state, sockets)
		}
	}

	// SHOW DATABASES: appdb as configured, with its current counts.
	dbs := show(t, admin, "SHOW DATABASES")
	d := dbs.one(t, "name", appDB)
	wantCols(t, "SHOW DATABASES appdb", d, "host", "127.0.0.1", "port", int(pg.port), "database", appDB,
		"force_user", nullText, "pool_size", 1, "min_pool_size", 0, "reserve_pool_size", 0,
		"pool_mode", nullText, "max_connections", 0, "current_connections", 1,
		"current_client_connections", 4, "paused", 0, "disabled", 0)
	wantCols(t, "SHOW DATABASES pgbouncer", dbs.one(t, "name", "pgbouncer"), "database", "pgbouncer", "force_user", "pgbouncer")
	for _, db := range []string{otherDB, benchDB} {
		dbs.one(t, "name", db)
	}

	// SHOW USERS: the [users] entry and an auth_file user.
	users := show(t, admin, "SHOW USERS")
	wantCols(t, "SHOW USERS bob", users.one(t, "name", bobUser), "pool_mode", "session", "max_user_connections", 7,
		"current_connections", 0, "current_client_connections", 0)
	wantCols(t, "SHOW USERS app", users.one(t, "name", appUser), "pool_mode", nullText, "max_user_connections", 0,
		"current_connections", 1, "current_client_connections", 4)

	// SHOW LISTS: 4 databases with the console's, 5 clients.
	lists := show(t, admin, "SHOW LISTS")
	wantCols(t, "SHOW LISTS databases", lists.one(t, "list", "databases"), "items", 4)
	wantCols(t, "SHOW LISTS used_clients", lists.one(t, "list", "used_clients"), "items", 5)
	wantCols(t, "SHOW LISTS peers", lists.one(t, "list", "peers"), "items", 0)
	if n := num(t, lists.one(t, "list", "pools"), "items"); n < 1 {
		t.Errorf("SHOW LISTS pools = %d", n)
	}
	if n := num(t, lists.one(t, "list", "users"), "items"); n < 6 {
		t.Errorf("SHOW LISTS users = %d, want the 7 auth_file users", n)
	}

	// SHOW STATE, SHOW VERSION; the empty subjects.
	state := show(t, admin, "SHOW STATE")
	wantCols(t, "SHOW STATE active", state.one(t, "key", "active"), "value", "yes")
	wantCols(t, "SHOW STATE paused", state.one(t, "key", "paused"), "value", "no")
	wantCols(t, "SHOW STATE suspended", state.one(t, "key", "suspended"), "value", "no")
	ver := show(t, admin, "SHOW VERSION")
	if len(ver.cols) != 1 || ver.cols[0] != "version" || len(ver.rows) != 1 || !strings.HasPrefix(ver.rows[0]["version"], "PgBouncer ") {
		t.Errorf("SHOW VERSION:\n%s", ver)
	}
	for _, q := range []string{"SHOW PEERS", "SHOW PEER_POOLS", "SHOW MEM", "SHOW DNS_HOSTS", "SHOW DNS_ZONES"} {
		if res := show(t, admin, q); len(res.rows) != 0 {
			t.Errorf("%s: %d rows, want none (no peers, no slabs, no DNS cache):\n%s", q, len(res.rows), res)
		}
	}
	// SHOW FDS outside an online restart: the listener, no descriptor.
	fds := show(t, admin, "SHOW FDS")
	wantCols(t, "SHOW FDS listener", fds.one(t, "task", "pooler"), "fd", "-1", "addr", "127.0.0.1", "port", strconv.Itoa(p.Port))

	// The holder commits: the waiters are served one by one.
	if _, err := holder.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(waitErrs)
	for err := range waitErrs {
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
	}
	waitPool(t, admin, appDB, appUser, 5*time.Second, "idle", func(r map[string]string) bool {
		return r["cl_waiting"] == "0" && r["sv_active"] == "0" && r["sv_idle"] == "1"
	})

	// SHOW STATS grows by exactly what ran: 5 autocommit statements (a
	// transaction and a query each), then 4 BEGIN/SELECT/COMMIT (one
	// transaction, three queries each).
	before := show(t, admin, "SHOW STATS").one(t, "database", appDB)
	for i := 0; i < 5; i++ {
		queryInt(t, holder, "SELECT 1")
	}
	for i := 0; i < 4; i++ {
		for _, q := range []string{"BEGIN", "SELECT 1", "COMMIT"} {
			if _, err := holder.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
	}
	after := show(t, admin, "SHOW STATS").one(t, "database", appDB)
	if d := num(t, after, "total_xact_count") - num(t, before, "total_xact_count"); d != 9 {
		t.Errorf("SHOW STATS total_xact_count grew by %d after 9 transactions", d)
	}
	if d := num(t, after, "total_query_count") - num(t, before, "total_query_count"); d != 17 {
		t.Errorf("SHOW STATS total_query_count grew by %d after 17 queries", d)
	}
	for _, c := range []string{"total_received", "total_sent", "total_xact_time", "total_query_time"} {
		if num(t, after, c) <= num(t, before, c) {
			t.Errorf("SHOW STATS %s did not grow (%s -> %s)", c, before[c], after[c])
		}
	}
	if num(t, after, "total_wait_time") <= 0 {
		t.Errorf("SHOW STATS total_wait_time = %s after 3 clients waited", after["total_wait_time"])
	}
	if n := num(t, after, "total_client_login_count"); n != 4 {
		t.Errorf("SHOW STATS total_client_login_count = %d, want 4 logins to appdb", n)
	}
	// The other stats views agree with SHOW STATS while idle.
	totals := show(t, admin, "SHOW STATS_TOTALS").one(t, "database", appDB)
	for _, c := range [][2]string{{"xact_count", "total_xact_count"}, {"query_count", "total_query_count"},
		{"bytes_received", "total_received"}, {"bytes_sent", "total_sent"}, {"wait_time", "total_wait_time"}} {
		if totals[c[0]] != after[c[1]] {
			t.Errorf("SHOW STATS_TOTALS %s = %s, SHOW STATS %s = %s", c[0], totals[c[0]], c[1], after[c[1]])
		}
	}
	show(t, admin, "SHOW STATS_AVERAGES").one(t, "database", appDB)
	var sumXact int64
	for _, r := range show(t, admin, "SHOW STATS").rows {
		sumXact += num(t, r, "total_xact_count")
	}
	// SHOW TOTALS counts itself: console queries are transactions of the
	// pgbouncer database, counted before they run, as in PgBouncer.
	wantCols(t, "SHOW TOTALS total_xact_count", show(t, admin, "SHOW TOTALS").one(t, "name", "total_xact_count"), "value", int(sumXact)+1)

	// SHOW CONFIG: the configured value, the default, changeability; a
	// console SET shows at once.
	cfg := show(t, admin, "SHOW CONFIG")
	wantCols(t, "SHOW CONFIG default_pool_size", cfg.one(t, "key", "default_pool_size"), "value", "1", "default", "20", "changeable", "yes")
	wantCols(t, "SHOW CONFIG listen_addr", cfg.one(t, "key", "listen_addr"), "value", "127.0.0.1", "changeable", "no")
	wantCols(t, "SHOW CONFIG admin_users", cfg.one(t, "key", "admin_users"), "value", adminUser)
	adminExec(t, admin, "SET default_pool_size = 3")
	wantCols(t, "SHOW CONFIG after SET", show(t, admin, "SHOW CONFIG").one(t, "key", "default_pool_size"), "value", "3")
	wantCols(t, "SHOW DATABASES after SET", show(t, admin, "SHOW DATABASES").one(t, "name", appDB), "pool_size", 3)

	// PAUSE shows in SHOW STATE and SHOW DATABASES.
	if tag := adminExec(t, admin, "PAUSE"); tag != "PAUSE" {
		t.Errorf("PAUSE tag %q", tag)
	}
	wantCols(t, "SHOW STATE after PAUSE", show(t, admin, "SHOW STATE").one(t, "key", "paused"), "value", "yes")
	if tag := adminExec(t, admin, "RESUME"); tag != "RESUME" {
		t.Errorf("RESUME tag %q", tag)
	}
	wantCols(t, "SHOW STATE after RESUME", show(t, admin, "SHOW STATE").one(t, "key", "paused"), "value", "no")
}

// TestAdminCommands: the control commands, their tags and errors, and the
// console's role and protocol rules.
func TestAdminCommands(t *testing.T) {
	p := startPooler(t, iniSettings(withConsoleUsers(nil), ""), opsUserlist)
	admin := adminConsole(t, p)
	stats := consoleAs(t, p, statsUser, statsPass, nil)

	// stats_users: SHOW yes, commands no.
	show(t, stats, "SHOW POOLS")
	for _, q := range []string{"PAUSE", "RESUME", "RELOAD", "DISABLE appdb", "KILL appdb", "RECONNECT", "SET default_pool_size = 5", "SHUTDOWN WAIT_FOR_CLIENTS"} {
		adminExecErr(t, stats, q, "08P01", "admin access needed")
	}
	// Unknown commands.
	adminExecErr(t, admin, "FROBNICATE", "08P01", "invalid command 'FROBNICATE', use SHOW HELP;")
	adminExecErr(t, admin, "SHOW NOSUCH", "08P01", "invalid command 'SHOW NOSUCH', use SHOW HELP;")
	adminExecErr(t, admin, "DISABLE", "08P01", "a database is required")
	// SUSPEND and RESUME: SHOW STATE follows; a second SUSPEND is
	// PgBouncer's error.
	if tag := adminExec(t, admin, "SUSPEND"); tag != "SUSPEND" {
		t.Errorf("SUSPEND tag %q", tag)
	}
	wantCols(t, "SHOW STATE suspended", show(t, admin, "SHOW STATE").one(t, "key", "suspended"), "value", "yes")
	adminExecErr(t, admin, "SUSPEND", "08P01", "already suspended/paused")
	if tag := adminExec(t, admin, "RESUME"); tag != "RESUME" {
		t.Errorf("RESUME tag %q", tag)
	}
	wantCols(t, "SHOW STATE suspended after RESUME", show(t, admin, "SHOW STATE").one(t, "key", "suspended"), "value", "no")
	selectOne(t, p.App()) // accepting again
	adminExecErr(t, admin, "KILL_CLIENT abc", "08P01", "invalid client pointer supplied")
	// Extended protocol: ERROR, then the connection is closed (FATAL).
	ext := connectPgx(t, p.ConnString("pgbouncer", adminUser, adminPass))
	_, err := ext.PgConn().ExecParams(ctxT(t, 10*time.Second), "SHOW POOLS", nil, nil, nil, nil).Close()
	if err == nil || !strings.Contains(err.Error(), "extended query protocol not supported by admin console") {
		t.Errorf("extended protocol on the console: %v", err)
	}

	// PAUSE appdb: a new query waits; RESUME releases it.
	c := connectPgx(t, p.App())
	queryInt(t, c, "SELECT 1")
	if tag := adminExec(t, admin, "PAUSE appdb"); tag != "PAUSE" {
		t.Errorf("PAUSE tag %q", tag)
	}
	wantCols(t, "SHOW DATABASES paused", show(t, admin, "SHOW DATABASES").one(t, "name", appDB), "paused", 1)
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(context.Background(), "SELECT 2")
		done <- err
	}()
	waitPool(t, admin, appDB, appUser, 5*time.Second, "cl_waiting=1", func(r map[string]string) bool { return r["cl_waiting"] == "1" })
	select {
	case err := <-done:
		t.Fatalf("query ran while appdb was paused (err %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	if tag := adminExec(t, admin, "RESUME appdb"); tag != "RESUME" {
		t.Errorf("RESUME tag %q", tag)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("query after RESUME: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("query still waiting 5s after RESUME")
	}

	// DISABLE appdb: new logins refused, existing clients go on; ENABLE.
	if tag := adminExec(t, admin, "DISABLE appdb"); tag != "DISABLE" {
		t.Errorf("DISABLE tag %q", tag)
	}
	wantCols(t, "SHOW DATABASES disabled", show(t, admin, "SHOW DATABASES").one(t, "name", appDB), "disabled", 1)
	if _, err := tryConnectPgx(t, pgxConfig(t, p.App())); err == nil {
		t.Error("login to a disabled database succeeded")
	} else {
		t.Logf("login to disabled appdb: %v", err)
	}
	queryInt(t, c, "SELECT 3")
	if tag := adminExec(t, admin, "ENABLE appdb"); tag != "ENABLE" {
		t.Errorf("ENABLE tag %q", tag)
	}
	selectOne(t, p.App())

	// RECONNECT appdb: the server is replaced after its release.
	pid1 := queryInt(t, c, "SELECT pg_backend_pid()")
	if tag := adminExec(t, admin, "RECONNECT appdb"); tag != "RECONNECT" {
		t.Errorf("RECONNECT tag %q", tag)
	}
	if tag := adminExec(t, admin, "WAIT_CLOSE appdb"); tag != "WAIT_CLOSE" {
		t.Errorf("WAIT_CLOSE tag %q", tag)
	}
	if pid2 := queryInt(t, c, "SELECT pg_backend_pid()"); pid2 == pid1 {
		t.Errorf("same backend %d after RECONNECT + WAIT_CLOSE", pid1)
	}

	// KILL_CLIENT id: that client only is dropped.
	victim := connectPgx(t, p.App()+" application_name=victim")
	queryInt(t, victim, "SELECT 1")
	id := show(t, admin, "SHOW CLIENTS").one(t, "application_name", "victim")["id"]
	if tag := adminExec(t, admin, "KILL_CLIENT "+id); tag != "KILL_CLIENT" {
		t.Errorf("KILL_CLIENT tag %q", tag)
	}
	if _, err := victim.Exec(ctxT(t, 5*time.Second), "SELECT 1"); err == nil {
		t.Error("killed client still runs queries")
	}
	if show(t, admin, "SHOW CLIENTS").has("application_name", "victim") {
		t.Error("killed client still in SHOW CLIENTS")
	}
	queryInt(t, c, "SELECT 4")
	adminExecErr(t, admin, "KILL_CLIENT 999999", "08P01", "")

	// KILL appdb: its clients are dropped and it stays paused until RESUME.
	if tag := adminExec(t, admin, "KILL appdb"); tag != "KILL" {
		t.Errorf("KILL tag %q", tag)
	}
	if _, err := c.Exec(ctxT(t, 5*time.Second), "SELECT 1"); err == nil {
		t.Error("client of a killed database still runs queries")
	}
	wantCols(t, "SHOW DATABASES after KILL", show(t, admin, "SHOW DATABASES").one(t, "name", appDB), "paused", 1)
	adminExec(t, admin, "RESUME appdb")
	selectOne(t, p.App())
	selectOne(t, p.ConnString(otherDB, appUser, appPassword))

	// Fake SET/SHOW for drivers.
	if v := show(t, admin, "SHOW client_encoding"); len(v.rows) != 1 || v.rows[0]["client_encoding"] != "UTF-8" {
		t.Errorf("SHOW client_encoding:\n%s", v)
	}
	if tag := adminExec(t, admin, "SET client_encoding = 'UTF8'"); tag != "SET" {
		t.Errorf("SET client_encoding tag %q", tag)
	}
}

// TestExporterScrape does what prometheus-community/pgbouncer_exporter
// does: lib/pq (simple protocol) as a stats user, SHOW VERSION/LISTS/CONFIG
// checked for shape, then DATABASES, STATS_TOTALS, STATS and POOLS read by
// column name with numeric columns parsed as float64.
func TestExporterScrape(t *testing.T) {
	p := startPooler(t, iniSettings(withConsoleUsers(nil), ""), opsUserlist)
	c := connectPgx(t, p.App())
	for i := 0; i < 3; i++ {
		queryInt(t, c, "SELECT 1")
	}

	db, err := sql.Open("postgres", p.ConnString("pgbouncer", statsUser, statsPass))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	scrape := func(q string) ([]string, []map[string]any) {
		t.Helper()
		rows, err := db.QueryContext(ctxT(t, 10*time.Second), q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		var out []map[string]any
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatalf("%s: scan: %v", q, err)
			}
			row := map[string]any{}
			for i, col := range cols {
				row[col] = vals[i]
			}
			out = append(out, row)
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return cols, out
	}
	asFloat := func(q, col string, v any) float64 {
		t.Helper()
		var s string
		switch x := v.(type) {
		case []byte:
			s = string(x)
		case string:
			s = x
		case int64:
			return float64(x)
		case float64:
			return x
		default:
			t.Fatalf("%s: column %s is %T (%v), not numeric", q, col, v, v)
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			t.Fatalf("%s: column %s = %q: %v", q, col, s, err)
		}
		return f
	}
	asString := func(v any) string {
		switch x := v.(type) {
		case []byte:
			return string(x)
		case string:
			return x
		}
		return fmt.Sprint(v)
	}

	// The exporter's "ping" is SHOW STATS (lib/pq's Ping sends ";", which
	// PgBouncer's console rejects), then its shape checks.
	scrape("SHOW STATS")
	cols, rows := scrape("SHOW VERSION")
	if len(cols) != 1 || cols[0] != "version" || len(rows) != 1 || !strings.HasPrefix(asString(rows[0]["version"]), "PgBouncer 1.") {
		t.Errorf("SHOW VERSION: %v %v", cols, rows)
	}
	if cols, _ := scrape("SHOW LISTS"); len(cols) != 2 {
		t.Errorf("SHOW LISTS columns %v, want 2", cols)
	}
	cols, rows = scrape("SHOW CONFIG")
	if len(cols) != 3 && len(cols) != 4 {
		t.Errorf("SHOW CONFIG: %d columns", len(cols))
	}
	cfg := map[string]string{}
	for _, r := range rows {
		cfg[asString(r["key"])] = asString(r["value"])
	}
	if cfg["max_client_conn"] != "100" || cfg["max_user_connections"] != "0" {
		t.Errorf("SHOW CONFIG max_client_conn=%q max_user_connections=%q", cfg["max_client_conn"], cfg["max_user_connections"])
	}

	// DATABASES: the exporter's gauges by name.
	_, rows = scrape("SHOW DATABASES")
	found := false
	for _, r := range rows {
		for _, col := range []string{"pool_size", "min_pool_size", "reserve_pool_size", "max_connections", "current_connections", "paused", "disabled"} {
			asFloat("SHOW DATABASES", col, r[col])
		}
		if asString(r["name"]) == appDB {
			found = true
			if asFloat("SHOW DATABASES", "pool_size", r["pool_size"]) != 20 || asString(r["host"]) != "127.0.0.1" {
				t.Errorf("SHOW DATABASES appdb: %v", r)
			}
		}
	}
	if !found {
		t.Errorf("SHOW DATABASES has no appdb row: %v", rows)
	}

	// STATS_TOTALS and STATS: 3 transactions, 3 queries on appdb.
	for _, q := range []string{"SHOW STATS_TOTALS", "SHOW STATS"} {
		prefix := ""
		if q == "SHOW STATS" {
			prefix = "total_"
		}
		cols, rows := scrape(q)
		var app map[string]any
		for _, r := range rows {
			for _, col := range cols[1:] {
				asFloat(q, col, r[col])
			}
			if asString(r["database"]) == appDB {
				app = r
			}
		}
		if app == nil {
			t.Fatalf("%s: no appdb row", q)
		}
		if x := asFloat(q, prefix+"xact_count", app[prefix+"xact_count"]); x != 3 {
			t.Errorf("%s appdb %sxact_count = %v, want 3", q, prefix, x)
		}
		if x := asFloat(q, prefix+"query_count", app[prefix+"query_count"]); x != 3 {
			t.Errorf("%s appdb %squery_count = %v, want 3", q, prefix, x)
		}
	}

	// POOLS: the exporter's gauges.
	_, rows = scrape("SHOW POOLS")
	found = false
	for _, r := range rows {
		for _, col := range []string{"cl_active", "cl_waiting", "cl_active_cancel_req", "cl_waiting_cancel_req",
			"sv_active", "sv_active_cancel", "sv_being_canceled", "sv_idle", "sv_used", "sv_tested", "sv_login", "maxwait", "maxwait_us"} {
			asFloat("SHOW POOLS", col, r[col])
		}
		if asString(r["database"]) == appDB && asString(r["user"]) == appUser {
			found = true
			if asFloat("SHOW POOLS", "cl_active", r["cl_active"]) != 1 || asFloat("SHOW POOLS", "sv_idle", r["sv_idle"]) != 1 ||
				asString(r["pool_mode"]) != "transaction" {
				t.Errorf("SHOW POOLS appdb/app: %v", r)
			}
		}
	}
	if !found {
		t.Errorf("SHOW POOLS has no appdb/app row")
	}
}

// errorsOf drains a channel of errors into a slice.
func errorsOf(ch <-chan error) []error {
	var out []error
	for err := range ch {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// TestShowClientsAfterClose: a client that closed its connection (pgx
// sends Terminate, then closes the socket) is not in the SHOW CLIENTS of
// a console session opened after it, as with PgBouncer, whose one loop
// handles the close first: PgBouncer's test_kill_db and test_kill_all
// count the clients right after the console session before closed (over
// the Unix socket, as here, and over TCP). With a goroutine per client
// the close could still be unread, which made those two tests fail now
// and then on a busy machine.
func TestShowClientsAfterClose(t *testing.T) {
	sock := t.TempDir()
	p := startPooler(t, iniSettings(withConsoleUsers(map[string]string{"unix_socket_dir": sock}), ""), opsUserlist)
	ctx := ctxT(t, time.Minute)
	viaSocket := func(s string) string { return strings.Replace(s, "host=127.0.0.1", "host="+sock, 1) }
	for i := range 40 {
		for _, cs := range []string{p.App(), viaSocket(p.App())} {
			conn := connectPgx(t, cs)
			var one int
			if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
				t.Fatalf("SELECT 1: %d, %v", one, err)
			}
			conn.Close(ctx)
		}
		for _, cs := range []string{viaSocket(p.ConnString("pgbouncer", adminUser, adminPass)), p.ConnString("pgbouncer", adminUser, adminPass)} {
			conn := connectPgx(t, cs)
			res, err := conn.PgConn().Exec(ctx, "SHOW CLIENTS").ReadAll()
			conn.Close(ctx)
			if err != nil || len(res) != 1 {
				t.Fatalf("SHOW CLIENTS: %v", err)
			}
			if n := len(res[0].Rows); n != 1 {
				t.Fatalf("round %d: SHOW CLIENTS lists %d clients; want the console session alone", i, n)
			}
		}
	}
}

//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgturnstile/pgturnstile/internal/pgtest"
)

// Roles of the cloudflare-fork.md §3.5 scenario, stored as md5 as it says.
// Only the tests in this file use them.
const (
	scenAuthUser = "pgb_auth"
	scenAuthPw   = "authpw"
	scenApp      = "app_user"
	scenAppPw    = "app_pw"
	scenAppPw2   = "app_pw2"
	scenOther    = "other_user"
	scenOtherPw  = "other_pw"

	scramPassword = "scram-pt-secret" // scramUser's, stored as SCRAM
	expiredUser   = "expired_user"    // SCRAM password, VALID UNTIL 2000
	expiredPw     = "expired-secret"
)

type roleSpec struct{ name, attrs, password string }

// ensureRoles creates the roles, or resets them when an earlier test (or an
// earlier -count) left them changed, with password_encryption = enc.
func ensureRoles(t testing.TB, enc string, roles ...roleSpec) {
	t.Helper()
	su := directSuperuser(t, "postgres")
	ctx := ctxT(t, 20*time.Second)
	if _, err := su.Exec(ctx, "SET password_encryption = '"+enc+"'"); err != nil {
		t.Fatal(err)
	}
	for _, r := range roles {
		verb := "CREATE"
		if queryInt(t, su, "SELECT count(*) FROM pg_roles WHERE rolname = $1", r.name) > 0 {
			verb = "ALTER"
		}
		s := fmt.Sprintf("%s ROLE %s WITH LOGIN %s PASSWORD '%s'", verb, r.name, r.attrs, r.password)
		if _, err := su.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// scenarioRoles sets up (or resets) the §3.5 roles, with the statement log
// on for pgb_auth's sessions so auth_query runs can be seen in the
// Postgres log.
func scenarioRoles(t testing.TB) {
	t.Helper()
	ensureRoles(t, "md5",
		roleSpec{scenAuthUser, "SUPERUSER", scenAuthPw},
		roleSpec{scenApp, "", scenAppPw},
		roleSpec{scenOther, "", scenOtherPw},
	)
	su := directSuperuser(t, "postgres")
	if _, err := su.Exec(ctxT(t, 10*time.Second), "ALTER ROLE "+scenAuthUser+" SET log_statement = 'all'"); err != nil {
		t.Fatal(err)
	}
	if enc := queryText(t, su, "SELECT string_agg(DISTINCT left(rolpassword, 3), ',') FROM pg_authid WHERE rolname IN ($1, $2, $3)",
		scenAuthUser, scenApp, scenOther); enc != "md5" {
		t.Fatalf("scenario roles stored as %q, want md5", enc)
	}
}

// scenarioUserlist is §3.5's userlist.txt: app_user and other_user absent.
const scenarioUserlist = `"pgb_auth" "authpw"
"admin" "adminpw"
`

// scenarioIni is §3.5's pgturnstile.ini (listen_port 0 and the harness's
// bounded query_wait_timeout aside). hbaFile != "" selects the HBA variant;
// authUser=false is step 9's config.
func scenarioIni(usersLine, hbaFile string, authUser bool) string {
	dbOpts := ""
	if authUser {
		dbOpts = " auth_user=" + scenAuthUser
	}
	authType := "auth_type = md5\n"
	if hbaFile != "" {
		authType = "auth_type = hba\nauth_hba_file = " + hbaFile + "\n"
	}
	return "[databases]\n" +
		"appdb = host=127.0.0.1 port=@PGPORT@ dbname=appdb" + dbOpts + "\n\n" +
		"[users]\n" + usersLine + "\n\n" +
		"[pgbouncer]\n" +
		"listen_addr = 127.0.0.1\n" +
		"listen_port = 0\n" +
		"unix_socket_dir =\n" +
		authType +
		"auth_file = @AUTH_FILE@\n" +
		"auth_query = SELECT usename, passwd FROM pg_shadow WHERE usename=$1\n" +
		"admin_users = admin\n" +
		"pool_mode = transaction\n" +
		"default_pool_size = 10\n" +
		"query_wait_timeout = 20\n"
}

// pgLogOffset is the current size of the Postgres log.
func pgLogOffset(t testing.TB) int64 {
	t.Helper()
	fi, err := os.Stat(pg.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// authQueryRuns counts auth_query executions for user in the Postgres
// statement log (pgb_auth's sessions log every statement) since offset:
// the extended protocol logs each as `DETAIL:  parameters: $1 = 'user'`.
func authQueryRuns(t testing.TB, offset int64, user string) int {
	t.Helper()
	b, err := os.ReadFile(pg.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if offset > int64(len(b)) {
		offset = 0
	}
	return strings.Count(string(b[offset:]), "$1 = '"+user+"'")
}

// terminateBackends ends every Postgres backend of user and waits until
// they are gone, so the next server login is a fresh one.
func terminateBackends(t testing.TB, user string) {
	t.Helper()
	su := directSuperuser(t, "postgres")
	if _, err := su.Exec(ctxT(t, 10*time.Second), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", user); err != nil {
		t.Fatal(err)
	}
	waitNoBackends(t, "", user)
}

// TestAuthQueryScenario is cloudflare-fork.md §3.5, steps 1-10, with
// pg_hba.conf variant B (extraHBALines: md5 for pgb_auth, app_user and
// other_user, so the fetched secret also logs the pool in to Postgres).
// Steps 6-8 use pg_stat_activity instead of SHOW POOLS and SIGHUP instead
// of RELOAD.
// §3.5 says FATAL 08P01 for a wrong password (PgBouncer before it adopted
// Postgres' codes); the issue and PgBouncer today say 28P01.
func TestAuthQueryScenario(t *testing.T) {
	needPG(t)
	const wrongPw = "password authentication failed"

	t.Run("md5", func(t *testing.T) {
		scenarioRoles(t)
		terminateBackends(t, scenApp)
		p := startPooler(t, scenarioIni(scenApp+" = max_user_connections=2", "", true), scenarioUserlist)
		conn := func(user string) string { return p.ConnString(appDB, user, "") }

		// 1. control: other_user, only in Postgres.
		wantLogin(t, conn(scenOther), scenOtherPw, scenOther, nil)

		// 2. app_user, named in [users] and absent from userlist.txt: its
		// password comes from auth_query, which Postgres saw run.
		off := pgLogOffset(t)
		wantLogin(t, conn(scenApp), scenAppPw, scenApp, nil)
		if n := authQueryRuns(t, off, scenApp); n < 2 {
			t.Errorf("step 2: auth_query for %s ran %d times in Postgres' statement log for 2 logins, want ≥ 2", scenApp, n)
		}

		// 3. wrong password.
		wantRefused(t, conn(scenApp), "wrong", "28P01", wrongPw, nil)

		// 4. a changed password counts at once, for the client and for the
		// server login: two transactions at once need more servers than
		// exist, and the new one logs in with the new secret.
		su := directSuperuser(t, "postgres")
		for _, s := range []string{"SET password_encryption = 'md5'", "ALTER ROLE " + scenApp + " PASSWORD '" + scenAppPw2 + "'"} {
			if _, err := su.Exec(ctxT(t, 10*time.Second), s); err != nil {
				t.Fatal(err)
			}
		}
		wantLogin(t, conn(scenApp), scenAppPw2, scenApp, nil)
		wantRefused(t, conn(scenApp), scenAppPw, "28P01", wrongPw, nil)
		before := countBackends(t, appDB, scenApp)
		var txs []*pgx.Conn
		for i := 0; i <= before; i++ {
			c := connectPgx(t, withPassword(conn(scenApp), scenAppPw2))
			if _, err := c.Exec(ctxT(t, 10*time.Second), "BEGIN"); err != nil {
				t.Fatalf("step 4: BEGIN on server %d of %d: %v", i+1, before+1, err)
			}
			txs = append(txs, c)
		}
		if n := countBackends(t, appDB, scenApp); n != before+1 {
			t.Errorf("step 4: %d backends with %d open transactions (%d before)", n, before+1, before)
		}
		for _, c := range txs {
			_ = c.Close(context.Background())
		}

		// 5. SHOW USERS: app_user (from [users]) with its cap and no
		// pool_mode; other_user (auth_query, after step 1) with the global
		// cap (0); the auth_file users pgb_auth and admin.
		users := map[string]map[string]*string{}
		for _, r := range consoleRows(t, p, "admin", "adminpw", "SHOW USERS") {
			if r["name"] != nil {
				users[*r["name"]] = r
			}
		}
		col := func(user, c string) string {
			if users[user] == nil || users[user][c] == nil {
				return "NULL"
			}
			return strings.TrimSpace(*users[user][c])
		}
		if users[scenApp] == nil || col(scenApp, "pool_mode") != "NULL" || col(scenApp, "max_user_connections") != "2" {
			t.Errorf("step 5: SHOW USERS row for %s: pool_mode=%s max_user_connections=%s, want NULL and 2", scenApp, col(scenApp, "pool_mode"), col(scenApp, "max_user_connections"))
		}
		if users[scenOther] == nil || col(scenOther, "max_user_connections") != "0" {
			t.Errorf("step 5: SHOW USERS row for %s: present=%v max_user_connections=%s, want the global 0", scenOther, users[scenOther] != nil, col(scenOther, "max_user_connections"))
		}
		for _, u := range []string{scenAuthUser, "admin"} {
			if users[u] == nil {
				t.Errorf("step 5: SHOW USERS has no row for auth_file user %s", u)
			}
		}
		if t.Failed() {
			for u := range users {
				t.Logf("step 5: SHOW USERS: %s pool_mode=%s max_user_connections=%s current_connections=%s",
					u, col(u, "pool_mode"), col(u, "max_user_connections"), col(u, "current_connections"))
			}
		}

		// 6. max_user_connections=2 from [users] applies to the auth_query
		// user: 4 clients, each BEGIN; SELECT pg_sleep(5); COMMIT.
		if t.Failed() {
			t.FailNow() // step 6 costs 10 s; no point if app_user cannot log in
		}
		sampler := sampleBackends(t, appDB, scenApp, 50*time.Millisecond)
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for i := 0; i < 4; i++ {
			c := connectPgx(t, withPassword(conn(scenApp), scenAppPw2))
			wg.Add(1)
			go func(c *pgx.Conn) {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				defer c.Close(ctx)
				for _, q := range []string{"BEGIN", "SELECT pg_sleep(5)", "COMMIT"} {
					if _, err := c.Exec(ctx, q); err != nil {
						errs <- fmt.Errorf("%s: %w", q, err)
						return
					}
				}
			}(c)
		}
		wg.Wait()
		elapsed := time.Since(start)
		close(errs)
		for err := range errs {
			t.Errorf("step 6: client: %v", err)
		}
		maxSeen, samples := sampler.stop(t)
		t.Logf("step 6: 4 clients done in %v; at most %d server connections in %d samples", elapsed.Round(time.Millisecond), maxSeen, samples)
		if maxSeen > 2 {
			t.Errorf("step 6: %d server connections for %s, max_user_connections=2", maxSeen, scenApp)
		}
		if maxSeen < 2 {
			t.Errorf("step 6: at most %d server connections seen, want the cap (2) reached", maxSeen)
		}
		if elapsed < 9500*time.Millisecond {
			t.Errorf("step 6: 4 × 5 s transactions on ≤ 2 servers took %v, want ≥ 10 s (two must wait)", elapsed)
		}

		// 7. [users] pool_mode=statement, reloaded: BEGIN is refused.
		p.WriteConfig(scenarioIni(scenApp+" = pool_mode=statement", "", true), scenarioUserlist)
		p.Reload()
		off = pgLogOffset(t)
		c := connectPgx(t, withPassword(conn(scenApp), scenAppPw2))
		if n := authQueryRuns(t, off, scenApp); n < 1 {
			t.Errorf("step 7: auth_query for %s ran %d times for one login, want 1", scenApp, n)
		}
		_, err := c.Exec(ctxT(t, 10*time.Second), "BEGIN", pgx.QueryExecModeSimpleProtocol)
		if err == nil {
			// Some poolers answer BEGIN and refuse the next statement.
			_, err = c.Exec(ctxT(t, 10*time.Second), "SELECT 1", pgx.QueryExecModeSimpleProtocol)
		}
		if err == nil || !strings.Contains(err.Error(), "transaction blocks not allowed in statement pooling mode") {
			t.Errorf("step 7: BEGIN as %s with [users] pool_mode=statement: %v, want %q", scenApp, err, "transaction blocks not allowed in statement pooling mode")
		}
		_ = c.Close(context.Background())

		// 8. app_user added to userlist.txt: its auth_file secret is used and
		// auth_query no longer runs for it (other_user still gets one).
		p.WriteConfig(scenarioIni(scenApp+" = pool_mode=statement", "", true), scenarioUserlist+`"app_user" "app_pw2"`+"\n")
		p.Reload()
		off = pgLogOffset(t)
		wantLogin(t, conn(scenApp), scenAppPw2, scenApp, nil)
		wantRefused(t, conn(scenApp), scenAppPw, "28P01", wrongPw, nil)
		wantLogin(t, conn(scenOther), scenOtherPw, scenOther, nil)
		if n := authQueryRuns(t, off, scenApp); n != 0 {
			t.Errorf("step 8: auth_query for %s ran %d times after it was added to userlist.txt, want 0", scenApp, n)
		}
		if n := authQueryRuns(t, off, scenOther); n < 2 {
			t.Errorf("step 8: auth_query for %s ran %d times for 2 logins, want ≥ 2 (the log check is blind otherwise)", scenOther, n)
		}

		// 9. no auth_user anywhere: a [users]-only user and an unknown one
		// get the same generic refusal. (SIGTERM waits for clients: all
		// of this test's are closed by now.)
		p.Stop()
		p9 := startPooler(t, scenarioIni(scenApp+" = max_user_connections=2", "", false), scenarioUserlist)
		wantRefused(t, p9.ConnString(appDB, scenApp, ""), scenAppPw2, "28P01", wrongPw, nil)
		wantRefused(t, p9.ConnString(appDB, scenOther, ""), scenOtherPw, "28P01", wrongPw, nil)
		noSecretsInLog(t, p9, scenAppPw2, scenOtherPw)
		noSecretsInLog(t, p, scenAuthPw, scenAppPw, scenAppPw2, scenOtherPw)
	})

	// 10. HBA variant: steps 1-3 with auth_type = hba.
	t.Run("hba", func(t *testing.T) {
		scenarioRoles(t)
		hba := writeTemp(t, "hba.conf", "host all all 127.0.0.1/32 md5\nhost pgbouncer admin 127.0.0.1/32 md5\n")
		p := startPooler(t, scenarioIni(scenApp+" = max_user_connections=2", hba, true), scenarioUserlist)
		conn := func(user string) string { return p.ConnString(appDB, user, "") }
		wantLogin(t, conn(scenOther), scenOtherPw, scenOther, nil)
		wantLogin(t, conn(scenApp), scenAppPw, scenApp, nil)
		wantRefused(t, conn(scenApp), "wrong", "28P01", wrongPw, nil)
		noSecretsInLog(t, p, scenAuthPw, scenAppPw, scenOtherPw)
	})
}

// consoleRows runs a SHOW command on p's admin console (database
// pgbouncer, simple protocol) as user and returns its rows by column name,
// NULL as nil.
func consoleRows(t testing.TB, p *Pooler, user, password, cmd string) []map[string]*string {
	t.Helper()
	cfg := pgxConfig(t, p.ConnString("pgbouncer", user, password))
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := tryConnectPgx(t, cfg)
	if err != nil {
		t.Fatalf("admin console login as %s: %v", user, err)
	}
	defer conn.Close(context.Background())
	res, err := conn.PgConn().Exec(ctxT(t, 10*time.Second), cmd).ReadAll()
	if err != nil || len(res) != 1 {
		t.Fatalf("%s: %v (%d results)", cmd, err, len(res))
	}
	var rows []map[string]*string
	for _, r := range res[0].Rows {
		m := map[string]*string{}
		for i, fd := range res[0].FieldDescriptions {
			if r[i] != nil {
				v := string(r[i])
				m[fd.Name] = &v
			}
		}
		rows = append(rows, m)
	}
	return rows
}

// TestSCRAMPassThrough: userlist.txt holds only scram_pt's SCRAM secret
// (taken from pg_authid), Postgres demands scram-sha-256 for scram_pt, and
// pgx and psql log in through the pooler: the pooler logs in to Postgres
// with the keys of the client's proof. No plaintext is configured anywhere.
func TestSCRAMPassThrough(t *testing.T) {
	needPG(t)
	ensureRoles(t, "scram-sha-256", roleSpec{scramUser, "", scramPassword})
	su := directSuperuser(t, "postgres")
	secret := queryText(t, su, "SELECT rolpassword FROM pg_authid WHERE rolname = $1", scramUser)
	if !strings.HasPrefix(secret, "SCRAM-SHA-256$4096:") {
		t.Fatalf("%s's secret is %q, want SCRAM-SHA-256$4096:…", scramUser, secret)
	}
	if m := queryText(t, su, "SELECT auth_method FROM pg_hba_file_rules WHERE $1 = ANY(user_name) ORDER BY line_number LIMIT 1", scramUser); m != "scram-sha-256" {
		t.Fatalf("pg_hba.conf's first rule for %s says %q, want scram-sha-256", scramUser, m)
	}
	terminateBackends(t, scramUser)

	p := startPooler(t, iniSettings(map[string]string{"auth_type": "scram-sha-256"}, ""), fmt.Sprintf("%q %q\n", scramUser, secret))
	for _, f := range []string{p.IniPath, p.AuthFile()} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), scramPassword) || strings.Contains(string(b), "password=") {
			t.Errorf("%s holds a plaintext password:\n%s", f, b)
		}
	}

	wantLogin(t, p.ConnString(appDB, scramUser, ""), scramPassword, scramUser, nil)
	wantRefused(t, p.ConnString(appDB, scramUser, ""), "wrong", "28P01", "SASL authentication failed", nil)

	// Two transactions at once: a second server login, with the same keys.
	a := connectPgx(t, p.ConnString(appDB, scramUser, scramPassword))
	b := connectPgx(t, p.ConnString(appDB, scramUser, scramPassword))
	for _, c := range []*pgx.Conn{a, b} {
		if _, err := c.Exec(ctxT(t, 10*time.Second), "BEGIN"); err != nil {
			t.Fatal(err)
		}
	}
	if n := countBackends(t, appDB, scramUser); n != 2 {
		t.Errorf("%d Postgres backends for %s with 2 open transactions, want 2", n, scramUser)
	}
	pids := queryText(t, a, "SELECT pg_backend_pid()::text") + "/" + queryText(t, b, "SELECT pg_backend_pid()::text")
	for _, c := range []*pgx.Conn{a, b} {
		if _, err := c.Exec(ctxT(t, 10*time.Second), "COMMIT"); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("server backends %s", pids)
	noSecretsInLog(t, p, scramPassword, secret)
}

// TestAuthQueryDefault: the default auth_query (pg_authid, rolvaliduntil)
// with a global auth_user and auth_dbname: a SCRAM secret fetched for a
// user missing from userlist.txt checks the client and, passed through,
// logs the pool in to Postgres (scram_pt must use SCRAM there); an expired
// role and one auth_query does not find are refused like a wrong password
// (PgBouncer says "no such user"; pgbouncer-compat.md, known differences).
func TestAuthQueryDefault(t *testing.T) {
	needPG(t)
	scenarioRoles(t)
	ensureRoles(t, "scram-sha-256",
		roleSpec{scramUser, "", scramPassword},
		roleSpec{expiredUser, "VALID UNTIL '2000-01-01'", expiredPw},
	)
	terminateBackends(t, scramUser)
	p := startPooler(t, iniSettings(map[string]string{
		"auth_type":   "scram-sha-256",
		"auth_user":   scenAuthUser,
		"auth_dbname": otherDB,
	}, ""), fmt.Sprintf("%q %q\n", scenAuthUser, scenAuthPw))

	wantLogin(t, p.ConnString(appDB, scramUser, ""), scramPassword, scramUser, nil)
	wantRefused(t, p.ConnString(appDB, scramUser, ""), "wrong", "28P01", "SASL authentication failed", nil)
	wantRefused(t, p.ConnString(appDB, expiredUser, ""), expiredPw, "28P01", "SASL authentication failed", nil)
	wantRefused(t, p.ConnString(appDB, "ghost", ""), "ghost", "28P01", "SASL authentication failed", nil)
	// auth_query ran in auth_dbname (otherdb), as pgb_auth.
	if n := countBackends(t, otherDB, scenAuthUser); n < 1 {
		t.Errorf("no %s backend in %s (auth_dbname)", scenAuthUser, otherDB)
	}
	noSecretsInLog(t, p, scramPassword, expiredPw, scenAuthPw)
}

// TestAuthQueryFailure: an auth_query that fails in Postgres refuses the
// login with PgBouncer's FATAL 08P01 "bouncer config error" (Postgres's
// error logged), an auth_dbname whose server cannot be reached with FATAL
// 08P01 "authentication query failed", promptly.
func TestAuthQueryFailure(t *testing.T) {
	needPG(t)
	scenarioRoles(t)
	const failed = "authentication query failed"
	const configError = "bouncer config error"
	userlist := fmt.Sprintf("%q %q\n", scenAuthUser, scenAuthPw)

	p := startPooler(t, iniSettings(map[string]string{
		"auth_type":  "md5",
		"auth_user":  scenAuthUser,
		"auth_query": "SELECT usename, no_such_column FROM pg_shadow WHERE usename=$1",
	}, ""), userlist)
	wantRefused(t, p.ConnString(appDB, scenOther, ""), scenOtherPw, "08P01", configError, nil)
	// The auth user's own server connection survived the SQL error.
	wantRefused(t, p.ConnString(appDB, scenOther, ""), scenOtherPw, "08P01", configError, nil)
	if !strings.Contains(p.Log(), `error in auth_query: ERROR: column "no_such_column" does not exist`) {
		t.Errorf("the auth query's error is not logged:\n%s", p.Log())
	}

	dead, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	pd := startPooler(t, iniSettings(map[string]string{
		"auth_type":              "md5",
		"auth_user":              scenAuthUser,
		"auth_dbname":            "deaddb",
		"server_connect_timeout": "2",
	}, fmt.Sprintf("[databases]\ndeaddb = host=127.0.0.1 port=%d dbname=appdb\n", dead)), userlist)
	start := time.Now()
	_, err = tryConnectPgx(t, pgxConfig(t, pd.ConnString(appDB, scenOther, scenOtherPw)))
	checkPgError(t, "pgx with auth_dbname unreachable", err, "08P01", failed)
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("refusal with an unreachable auth_dbname took %v", d)
	}
}

// TestAuthDBNameDisabled: DISABLE of the auth_dbname database stops the
// auth queries there too: a login that needs one is refused with
// PgBouncer's words (issue 18, cause 18).
func TestAuthDBNameDisabled(t *testing.T) {
	needPG(t)
	scenarioRoles(t)
	userlist := fmt.Sprintf("%q %q\n%q %q\n", scenAuthUser, scenAuthPw, adminUser, adminPass)
	p := startPooler(t, iniSettings(withConsoleUsers(map[string]string{
		"auth_type":   "md5",
		"auth_user":   scenAuthUser,
		"auth_dbname": otherDB,
	}), ""), userlist)
	wantLogin(t, p.ConnString(appDB, scenOther, ""), scenOtherPw, scenOther, nil)
	admin := adminConsole(t, p)
	adminExec(t, admin, "DISABLE "+otherDB)
	wantRefused(t, p.ConnString(appDB, scenOther, ""), scenOtherPw, "08P01",
		fmt.Sprintf("authentication database %q is disabled", otherDB), nil)
	adminExec(t, admin, "ENABLE "+otherDB)
	wantLogin(t, p.ConnString(appDB, scenOther, ""), scenOtherPw, scenOther, nil)
}

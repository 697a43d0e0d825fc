package pooler

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoginAuthSources pins who may log in, and what the others are told,
// by where their secret comes from (issue 18, cause 8, in PgBouncer's
// words). Under trust, an auth_file user and a role auth_query finds are
// admitted, a role without a password included; a name only in [users]
// (limits, never a login) or known to nobody is refused with FATAL 08P01
// "\"trust\" authentication failed". A role auth_query does not find is
// told "no such user" under trust (which admits any role that exists, so
// this tells nothing more) and gets, under a password method, the mock exchange and the wrong
// password's error (a deliberate difference: PgBouncer says "no such
// user", which tells a prober the role does not exist); a role it finds
// with a NULL secret is admitted by trust but matches no password.
// An error of the auth query itself is "bouncer config error", its cause
// logged, and the console, which has no server, is no auth database.
func TestLoginAuthSources(t *testing.T) {
	users := filepath.Join(t.TempDir(), "userlist.txt")
	if err := os.WriteFile(users, []byte(`"erin" "x"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The fake answers a query marked fake:null with a NULL secret, one
	// marked fake:norow with no row, and fails one naming fail_exec.
	dbs := map[string]string{
		"ldb":     "",
		"nulldb":  "auth_user=erin auth_query='SELECT /* fake:null */ $1'",
		"norowdb": "auth_user=erin auth_query='SELECT /* fake:norow */ $1'",
		"faildb":  "auth_user=erin auth_query='SELECT fail_exec, $1'",
	}
	user := func(name, db string) []byte {
		return startupPacket(0, [][2]string{{"user", name}, {"database", db}})
	}
	welcome := "R0 S* K Z(I)"
	type loginCase struct{ name, user, db, password, want string }
	run := func(t *testing.T, tp *testPooler, cases []loginCase) {
		t.Helper()
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				got, _ := loginTranscriptPassword(t, tp.addr, [][]byte{user(tc.user, tc.db)}, tc.password)
				if got != tc.want {
					t.Errorf("transcript\n got %q\nwant %q", got, tc.want)
				}
			})
		}
	}
	wantLogs := func(t *testing.T, tp *testPooler, lines ...string) {
		t.Helper()
		logs := tp.log.tail()
		for _, l := range lines {
			if !strings.Contains(logs, l) {
				t.Errorf("no log line with %q in\n%s", l, logs)
			}
		}
	}

	t.Run("trust", func(t *testing.T) {
		fake := startFakePostgres(t)
		tp := startTestPooler(t, fake, dbs, fmt.Sprintf("auth_type = trust\nauth_file = %s\n[users]\ndave = pool_size=1\n", users))
		defer tp.shutdown(t, fake)
		trustFailed := `E(FATAL 08P01 "trust" authentication failed)`
		run(t, tp, []loginCase{
			{"authFileUser", "erin", "ldb", "", welcome},
			{"usersSectionOnly", "dave", "ldb", "", trustFailed},
			{"unknown", "carol", "ldb", "", trustFailed},
			{"authQueryNullSecret", "carol", "nulldb", "", welcome},
			{"authQueryNoRow", "carol", "norowdb", "", "E(FATAL 08P01 no such user)"},
			{"authQueryError", "carol", "faildb", "", "E(FATAL 08P01 bouncer config error)"},
			{"consoleUnknown", "carol", "pgbouncer", "", trustFailed},
		})
		wantLogs(t, tp,
			`closing because: "trust" authentication failed (age=`,
			`error in auth_query: ERROR: relation "fail_exec" does not exist`,
		)
	})

	t.Run("password", func(t *testing.T) {
		fake := startFakePostgres(t)
		tp := startTestPooler(t, fake, dbs, fmt.Sprintf("auth_type = plain\nauth_file = %s\nauth_user = erin\nauth_query = SELECT /* fake:null */ $1\n", users))
		defer tp.shutdown(t, fake)
		run(t, tp, []loginCase{
			// A role without a password and one auth_query does not
			// find both look like a wrong password.
			{"authQueryNullSecret", "carol", "ldb", "pw", "R3 E(FATAL 28P01 password authentication failed)"},
			{"authQueryNoRow", "carol", "norowdb", "pw", "R3 E(FATAL 28P01 password authentication failed)"},
			{"consoleAsAuthDB", "carol", "pgbouncer", "pw", "E(FATAL 08P01 bouncer config error)"},
		})
		// With the client's prefix attributes, as PgBouncer's slog_error(client, …).
		wantLogs(t, tp, `cannot use the reserved "pgbouncer" database as an auth_dbname conn=C-`)
	})
}

//go:build linux

package integration

import (
	"crypto/md5"
	"fmt"
	"strings"
	"testing"
)

// TestAuthTypes: each auth_type logs a client in with the right password and
// refuses a wrong one with 28P01 (trust accepts any), with pgx and with psql.
func TestAuthTypes(t *testing.T) {
	needPG(t)
	md5Secret := fmt.Sprintf("md5%x", md5.Sum([]byte(md5Password+md5User)))
	cases := []struct {
		authType string
		userlist string
		db, user string
		password string
		wrongMsg string // "" = a wrong password is accepted
	}{
		{"trust", testUserlist, appDB, appUser, appPassword, ""},
		{"plain", testUserlist, appDB, appUser, appPassword, "password authentication failed"},
		{"md5", testUserlist, appDB, appUser, appPassword, "password authentication failed"},
		// md5 secret in userlist.txt: the pooler checks the client and logs
		// in to Postgres (md5) with the hash alone.
		{"md5", fmt.Sprintf("%q %q\n", md5User, md5Secret), appDB, md5User, md5Password, "password authentication failed"},
		{"scram-sha-256", testUserlist, appDB, appUser, appPassword, "SASL authentication failed"},
	}
	for _, tc := range cases {
		name := tc.authType + "/" + tc.user
		t.Run(name, func(t *testing.T) {
			p := startPooler(t, iniSettings(map[string]string{"auth_type": tc.authType}, ""), tc.userlist)
			right := p.ConnString(tc.db, tc.user, tc.password)
			wrong := p.ConnString(tc.db, tc.user, "not-"+tc.password)

			// pgx
			conn := connectPgx(t, right)
			if got := queryText(t, conn, "SELECT current_user"); got != tc.user {
				t.Errorf("pgx: current_user = %q, want %q", got, tc.user)
			}
			_, err := tryConnectPgx(t, pgxConfig(t, wrong))
			if tc.wrongMsg == "" {
				if err != nil {
					t.Errorf("pgx with wrong password under trust: %v", err)
				}
			} else {
				wantPgError(t, err, "FATAL", "28P01", tc.wrongMsg)
			}

			// psql
			out, errOut, err := psql(t, tc.password, p.ConnString(tc.db, tc.user, ""), "-tAc", "SELECT current_user")
			if err != nil || strings.TrimSpace(out) != tc.user {
				t.Errorf("psql right password: out=%q err=%v stderr=%q", out, err, errOut)
			}
			out, errOut, err = psql(t, "not-"+tc.password, p.ConnString(tc.db, tc.user, ""), "-tAc", "SELECT current_user")
			if tc.wrongMsg == "" {
				if err != nil || strings.TrimSpace(out) != tc.user {
					t.Errorf("psql wrong password under trust: out=%q err=%v stderr=%q", out, err, errOut)
				}
			} else {
				if err == nil {
					t.Errorf("psql wrong password: succeeded (out=%q)", out)
				}
				if !strings.Contains(errOut, "FATAL:  "+tc.wrongMsg) {
					t.Errorf("psql wrong password: stderr %q, want it to contain %q", errOut, "FATAL:  "+tc.wrongMsg)
				}
			}
		})
	}
}

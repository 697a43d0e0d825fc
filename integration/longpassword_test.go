//go:build linux

package integration

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestLongCleartextPassword (issue 32, item 10): with auth_type = plain
// and the default max_packet_size, a password message larger than the
// client's read buffer is read whole. A correct 65,530-byte password (the
// length PgBouncer's own tests send) logs in, against a plain and an md5
// auth_file secret; a wrong 4,091-byte one is a wrong password (28P01),
// not "max_packet_size exceeded"; one longer than any password PgBouncer
// takes is a malformed password packet (08P01), and the pooler serves on.
func TestLongCleartextPassword(t *testing.T) {
	needPG(t)
	const unit = "pä$s'w\"o\\rd "
	long := strings.Repeat(unit, 65530/len(unit))
	long += strings.Repeat("x", 65530-len(long))
	if len(long) != 65530 {
		t.Fatalf("password of %d bytes", len(long))
	}
	sum := md5.Sum([]byte(long + "longmd5"))
	// userlist.txt doubles a quote inside a quoted field.
	userlist := testUserlist + fmt.Sprintf("\"longplain\" \"%s\"\n\"longmd5\" \"md5%s\"\n",
		strings.ReplaceAll(long, `"`, `""`), hex.EncodeToString(sum[:]))
	// Both users log in to Postgres as the app user: the long password is
	// the pooler's to check.
	extra := fmt.Sprintf("[databases]\nlongdb = host=127.0.0.1 port=@PGPORT@ dbname=%s user=%s password=%s\n", appDB, appUser, appPassword)
	p := startPooler(t, iniSettings(map[string]string{"auth_type": "plain"}, extra), userlist)

	for _, user := range []string{"longplain", "longmd5"} {
		cfg := pgxConfig(t, p.ConnString("longdb", user, ""))
		cfg.Password = long
		conn, err := tryConnectPgx(t, cfg)
		if err != nil {
			t.Fatalf("%s with its 65,530-byte password: %v", user, err)
		}
		if got := queryText(t, conn, "SELECT current_user::text"); got != appUser {
			t.Errorf("%s: current_user = %q, want %q", user, got, appUser)
		}
	}

	for _, tc := range []struct {
		password, code, message string
	}{
		{strings.Repeat("w", 4091), "28P01", "password authentication failed"},
		{long[:65529] + "y", "28P01", "password authentication failed"},
		{strings.Repeat("w", 70000), "08P01", "malformed password packet"},
	} {
		cfg := pgxConfig(t, p.ConnString("longdb", "longplain", ""))
		cfg.Password = tc.password
		cfg.ConnectTimeout = 10 * time.Second
		_, err := tryConnectPgx(t, cfg)
		wantPgError(t, err, "FATAL", tc.code, tc.message)
	}
	selectOne(t, p.App())
}

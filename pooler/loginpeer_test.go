package pooler

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// TestPeerAuthIdentMap pins hba peer logins over the Unix socket, with and
// without an auth_ident_file map, in PgBouncer's words: the peer's OS user
// is the user name, or a map line allows it; a user without an auth source
// is refused even where the map says all; peer over TCP is refused.
func TestPeerAuthIdentMap(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Skip(err)
	}
	osUser := me.Username
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hba := write("hba.conf", strings.Join([]string{
		"local mapped all peer map=m",
		"local anyone all peer map=everyone",
		"local all all peer",
		"host all all 127.0.0.1/32 peer",
	}, "\n")+"\n")
	ident := write("ident.conf", strings.Join([]string{
		"# MAPNAME SYSTEM-USERNAME PG-USERNAME",
		fmt.Sprintf("m %s alice", osUser),
		`m nobody-here "bob"`,
		fmt.Sprintf(`everyone "%s" all`, osUser),
	}, "\n")+"\n")
	users := write("userlist.txt", fmt.Sprintf(`"%s" "x"`+"\n"+`"alice" "x"`+"\n"+`"bob" "x"`+"\n", osUser))
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"ldb": "", "mapped": "", "anyone": ""}, fmt.Sprintf(`auth_type = hba
auth_hba_file = %s
auth_ident_file = %s
auth_file = %s
unix_socket_dir = %s
`, hba, ident, users, dir))
	defer tp.shutdown(t, fake)
	sock := tp.svc.Addrs()[len(tp.svc.Addrs())-1].String()
	if !strings.HasPrefix(sock, dir) {
		t.Fatalf("no Unix socket listener in %v", tp.svc.Addrs())
	}

	login := func(name, db string) []byte {
		return startupPacket(0, [][2]string{{"user", name}, {"database", db}})
	}
	welcome := "R0 S* K Z(I)"
	rejected := "E(FATAL 08P01 unix socket login rejected)"
	for _, tc := range []struct {
		name, network, user, db, want, log string
	}{
		{"sameUser", "unix", osUser, "ldb", welcome, ""},
		{"otherUser", "unix", "alice", "ldb", rejected, ""},
		{"mapped", "unix", "alice", "mapped", welcome, ""},
		{"mapLineOfAnotherOSUser", "unix", "bob", "mapped", rejected, "ident map m cannot be matched"},
		{"mapAll", "unix", "bob", "anyone", welcome, ""},
		{"mapAllUnknownUser", "unix", "carol", "anyone", rejected, ""},
		{"tcp", "tcp", osUser, "ldb", rejected, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := sock
			if tc.network == "tcp" {
				addr = tp.addr
			}
			got, _ := loginTranscriptNet(t, tc.network, addr, [][]byte{login(tc.user, tc.db)}, "")
			if got != tc.want {
				t.Errorf("transcript\n got %q\nwant %q", got, tc.want)
			}
			if tc.log != "" && !strings.Contains(tp.log.tail(), tc.log) {
				t.Errorf("log lacks %q", tc.log)
			}
		})
	}
}

//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// unix_socket_mode is the socket file's mode, and a database whose host
// is a name is reached through the DNS cache, which SHOW DNS_HOSTS and
// SHOW LISTS then list, as PgBouncer's do.
func TestUnixSocketModeAndDNSHosts(t *testing.T) {
	needPG(t)
	sock := t.TempDir()
	os.Chmod(sock, 0o777) // the pooler's user creates its socket here
	ini := iniSettings(withConsoleUsers(map[string]string{"unix_socket_dir": sock, "unix_socket_mode": "0660", "dns_max_ttl": "30"}), "")
	ini = strings.Replace(ini, "[databases]\n", "[databases]\ndnsdb = host=localhost port=@PGPORT@ dbname="+appDB+"\n", 1)
	p := startPooler(t, ini, opsUserlist)
	// The pooler is up once its TCP listener is; the Unix socket comes
	// next, its mode once it is logged.
	if !p.WaitLog("listening on unix:", 10*time.Second) {
		t.Fatal("the Unix socket was not logged")
	}
	fi, err := os.Stat(filepath.Join(sock, ".s.PGSQL."+strconv.Itoa(p.Port)))
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o660 {
		t.Errorf("socket mode %o, want unix_socket_mode 0660", got)
	}

	selectOne(t, p.ConnString("dnsdb", appUser, appPassword))
	con := adminConsole(t, p)
	hosts := show(t, con, "SHOW DNS_HOSTS")
	if len(hosts.rows) != 1 || hosts.rows[0]["hostname"] != "localhost" || !strings.Contains(hosts.rows[0]["addrs"], "127.0.0.1:0") {
		t.Fatalf("SHOW DNS_HOSTS: %+v", hosts.rows)
	}
	if ttl, _ := strconv.Atoi(hosts.rows[0]["ttl"]); ttl <= 0 || ttl > 30 {
		t.Errorf("ttl %q, want within dns_max_ttl 30", hosts.rows[0]["ttl"])
	}
	for _, r := range show(t, con, "SHOW LISTS").rows {
		if r["list"] == "dns_names" && r["items"] != "1" {
			t.Errorf("SHOW LISTS dns_names = %s, want 1", r["items"])
		}
	}
}

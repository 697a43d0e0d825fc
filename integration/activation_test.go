//go:build linux

package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgturnstile/pgturnstile/internal/pgtest"
)

// socketActivatePath finds systemd-socket-activate (Debian's systemd
// package), which starts a program with listening sockets as a .socket
// unit does.
func socketActivatePath(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		t.Skip("systemd-socket-activate not found: scripts/test-deps.sh installs it (Debian package systemd)")
	}
	return path
}

// TestSocketActivation: started by systemd-socket-activate with a TCP and
// a Unix listening socket (its listening-socket mode, as a .socket unit
// with Accept=no), the pooler serves exactly those two: pgx runs a query
// through each, the log has PgBouncer's lines for passed sockets, READY=1
// still reaches NOTIFY_SOCKET, and neither listen_addr:listen_port nor
// unix_socket_dir of its config is bound. It runs twice: with a config
// that names other sockets, and with one that names the passed ones (the
// usual setup: pgbouncer.ini and the .socket unit agree), where the
// Unix-socket guard, which would find systemd's socket accepting and
// refuse to start, must not run.
func TestSocketActivation(t *testing.T) {
	t.Run("other config", func(t *testing.T) { testSocketActivation(t, false) })
	t.Run("same as config", func(t *testing.T) { testSocketActivation(t, true) })
}

func testSocketActivation(t *testing.T, sameAsConfig bool) {
	needPG(t)
	activate := socketActivatePath(t)
	bin := poolerBinary(t)
	// Short paths: a Unix socket's name has at most 107 bytes.
	dir, err := os.MkdirTemp("", "sa")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, d := range []string{"passed", "config"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(dir, d), 0o777) // the pooler's user writes there
	}
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	configPort, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	unixPath := filepath.Join(dir, "passed", ".s.PGSQL."+strconv.Itoa(port))
	configDir := filepath.Join(dir, "config")
	if sameAsConfig {
		configPort, configDir = port, filepath.Dir(unixPath)
	}

	notifyPath := filepath.Join(dir, "notify")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { notify.Close() })
	os.Chmod(notifyPath, 0o777)

	ini := iniSettings(map[string]string{
		"listen_addr":     "127.0.0.1",
		"listen_port":     strconv.Itoa(configPort),
		"unix_socket_dir": configDir,
	}, "")
	// As a .socket unit, systemd-socket-activate binds, then starts the
	// program at the first connection: it execs the pooler (LISTEN_PID is
	// the pooler's pid), passing only the environment it is told to.
	p := startWrapped(t, ini, testUserlist, func(iniPath string) *exec.Cmd {
		return exec.Command(activate, "-l", "127.0.0.1:"+strconv.Itoa(port), "-l", unixPath,
			"--fdname=pgturnstile", "-E", "NOTIFY_SOCKET="+notifyPath, bin, iniPath)
	}, "Listening on "+unixPath+" as 4.")

	// The first connection, through TCP, starts the pooler and is its
	// first client; then one through the Unix socket.
	for _, host := range []string{"127.0.0.1", filepath.Dir(unixPath)} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		conn, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d dbname=%s user=%s password=%s sslmode=disable", host, port, appDB, appUser, appPassword))
		if err != nil {
			cancel()
			t.Fatalf("connect through the passed socket %s: %v", host, err)
		}
		var got int
		err = conn.QueryRow(ctx, "SELECT 41 + 1").Scan(&got)
		conn.Close(ctx)
		cancel()
		if err != nil || got != 42 {
			t.Fatalf("query through %s: %d %v", host, got, err)
		}
	}

	notify.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	n, err := notify.Read(buf)
	if err != nil || !strings.HasPrefix(string(buf[:n]), "READY=1") {
		t.Errorf("NOTIFY_SOCKET: %q %v, want READY=1", buf[:n], err)
	}
	log := p.log.String()
	for _, want := range []string{
		"listening on 127.0.0.1:" + strconv.Itoa(port) + " (inherited)",
		"listening on unix:" + unixPath + " (inherited)",
		"sockets passed from service manager, cf_listen_addr ignored",
		"sockets passed from service manager, cf_unix_socket_dir ignored",
		"socket passed from service manager (fd 3)",
		"socket passed from service manager (fd 4)",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log has no %q:\n%s", want, log)
		}
	}
	// Nothing of its own: the process listens on the two passed sockets
	// only, and the config's port and socket directory stay free.
	want := []string{"tcp 127.0.0.1:" + strconv.Itoa(port), "unix " + unixPath}
	if got := listeningSockets(t, p.cmd.Process.Pid); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("the pooler listens on %q, want only the passed %q", got, want)
	}
	if !sameAsConfig {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(configPort), time.Second); err == nil {
			c.Close()
			t.Errorf("listen_port %d is bound", configPort)
		}
		if entries, _ := os.ReadDir(configDir); len(entries) != 0 {
			t.Errorf("unix_socket_dir has %v, want nothing", entries)
		}
	}

	// The passed Unix socket is systemd's: the pooler leaves it in place
	// when it exits.
	p.Stop()
	if fi, err := os.Lstat(unixPath); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("after the pooler exited, the passed socket %s: %v", unixPath, err)
	}
}

// TestSocketActivationRefusesNonSocket: a descriptor passed as a listening
// socket that is none (here a regular file) ends the start: FATAL, exit 1,
// before anything is bound.
func TestSocketActivationRefusesNonSocket(t *testing.T) {
	needPG(t)
	bin := poolerBinary(t)
	dir := t.TempDir()
	iniPath := filepath.Join(dir, "pgbouncer.ini")
	ini := strings.NewReplacer("@PGPORT@", strconv.Itoa(pg.port), "@AUTH_FILE@", filepath.Join(dir, "userlist.txt")).
		Replace(iniSettings(nil, ""))
	if err := os.WriteFile(iniPath, []byte(ini), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "userlist.txt"), []byte(testUserlist), 0o600); err != nil {
		t.Fatal(err)
	}
	// The shell's pid is the pooler's after exec: LISTEN_PID names it.
	cmd := exec.Command("sh", "-c", `exec env LISTEN_PID=$$ LISTEN_FDS=1 "$0" "$1" 3<"$1"`, bin, iniPath)
	cmd.Dir = dir
	cmd.SysProcAttr = poolerProcAttr(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			cmd.Process.Kill()
		case <-done:
		}
	}()
	out, err := cmd.CombinedOutput()
	close(done)
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit %d (%v), want 1; output:\n%s", code, err, out)
	}
	if !strings.Contains(string(out), "socket passed from service manager (fd 3): not a socket") {
		t.Errorf("output has no refusal of fd 3:\n%s", out)
	}
	if strings.Contains(string(out), "listening on") {
		t.Errorf("it listened:\n%s", out)
	}
}

// startWrapped is startPooler for a program that execs the pooler,
// keeping its pid: command makes its command line (the ini path given),
// and it is up once its output has ready.
func startWrapped(t *testing.T, ini, userlist string, command func(iniPath string) *exec.Cmd, ready string) *Pooler {
	t.Helper()
	p := launchPooler(t, ini, userlist, command)
	p.waitStarted(func(log string) bool { return strings.Contains(log, ready) }, ready)
	return p
}

// listeningSockets is what process pid listens on, from /proc: "tcp
// ADDR:PORT" for each listening TCP socket among its descriptors (IPv4
// only; an IPv6 one shows as "tcp6 PORT"), "unix PATH" for each Unix one,
// sorted.
func listeningSockets(t *testing.T, pid int) []string {
	t.Helper()
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(fdDir)
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, e := range entries {
		if link, err := os.Readlink(filepath.Join(fdDir, e.Name())); err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var out []string
	table := func(name string) [][]string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, name))
		if err != nil {
			t.Fatal(err)
		}
		var rows [][]string
		for _, line := range strings.Split(string(b), "\n")[1:] {
			if f := strings.Fields(line); len(f) > 0 {
				rows = append(rows, f)
			}
		}
		return rows
	}
	for _, name := range []string{"tcp", "tcp6"} {
		for _, f := range table(name) {
			// sl local_address rem_address st … inode (the 10th field);
			// st 0A is LISTEN.
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
				continue
			}
			addr, portHex, _ := strings.Cut(f[1], ":")
			p, _ := strconv.ParseUint(portHex, 16, 16)
			if name == "tcp" && len(addr) == 8 {
				a, _ := strconv.ParseUint(addr, 16, 32) // little-endian
				out = append(out, fmt.Sprintf("tcp %d.%d.%d.%d:%d", a&0xff, a>>8&0xff, a>>16&0xff, a>>24, p))
			} else {
				out = append(out, fmt.Sprintf("%s %d", name, p))
			}
		}
	}
	for _, f := range table("unix") {
		// Num RefCount Protocol Flags Type St Inode [Path]; Flags
		// 00010000 is __SO_ACCEPTCON: a listening socket.
		if len(f) < 7 || f[3] != "00010000" || !inodes[f[6]] {
			continue
		}
		path := ""
		if len(f) > 7 {
			path = f[7]
		}
		out = append(out, "unix "+path)
	}
	sort.Strings(out)
	return out
}

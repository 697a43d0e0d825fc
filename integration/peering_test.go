//go:build linux

package integration

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Peering and rolling restarts (PgBouncer 1.23+): processes sharing one
// port with so_reuseport, each with its own peer_id and Unix socket, the
// others in [peers].

// peerIni is a pooler's ini for a peer group: so_reuseport, peer_id id, its
// own Unix socket in sockDir, and peers (the [peers] lines) when set.
func peerIni(id int, listenAddr string, port int, sockDir, peers string) string {
	extra := ""
	if peers != "" {
		extra = "[peers]\n" + peers
	}
	return iniSettings(map[string]string{
		"listen_addr":     listenAddr,
		"listen_port":     fmt.Sprint(port),
		"unix_socket_dir": sockDir,
		"so_reuseport":    "1",
		"peer_id":         fmt.Sprint(id),
	}, extra)
}

// keyPeer is the peer id a client's cancel key carries (bytes 1-2 of the
// key, little-endian; pgx's PID is bytes 0-3, big-endian).
func keyPeer(conn *pgx.Conn) int {
	pid := conn.PgConn().PID()
	return int(pid>>16&0xFF) | int(pid>>8&0xFF)<<8
}

// sendCancel sends conn's CancelRequest over a connection of its own to
// network/address, which need not be the process conn is on, and waits
// for that process to hang up.
func sendCancel(t *testing.T, conn *pgx.Conn, network, address string) {
	t.Helper()
	c, err := net.DialTimeout(network, address, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := binary.BigEndian.AppendUint32(nil, 16)
	msg = binary.BigEndian.AppendUint32(msg, 80877102)
	msg = binary.BigEndian.AppendUint32(msg, conn.PgConn().PID())
	msg = append(msg, conn.PgConn().SecretKey()...)
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	c.Read(b[:])
}

// sleepCanceled runs SELECT pg_sleep(10) on conn, calls cancel once the
// query runs, and asserts it ended with 57014. Whatever fails, conn is
// not used any more once it returns: the query's goroutine is stopped and
// waited for first (deferred, so a t.Fatal runs it too), since conn's
// t.Cleanup closes it and a Close beside a running Exec is a data race
// that the race detector would report on top of the test's own failure.
func sleepCanceled(t *testing.T, conn *pgx.Conn, cancel func()) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, sleepingQuery)
		errc <- err
	}()
	done := false
	defer func() {
		if !done {
			stop()
			<-errc
		}
		stop()
	}()
	waitSleeping(t)
	cancel()
	select {
	case err := <-errc:
		done = true
		wantPgError(t, err, "ERROR", "57014", "canceling statement due to user request")
	case <-time.After(8 * time.Second):
		t.Fatal("the query was not cancelled")
	}
}

// sleepingQuery is the query sleepCanceled runs and waitSleeping looks
// for; TestSleepCanceledFailsCleanly's child waits for another.
var sleepingQuery = "SELECT pg_sleep(10)"

// waitSleeping waits until Postgres runs a pg_sleep(10) of appdb.
func waitSleeping(t *testing.T) {
	t.Helper()
	want := sleepingQuery
	if os.Getenv(sleepChildEnv) != "" {
		want = "never this query"
	}
	pg.monitorMu.Lock()
	defer pg.monitorMu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		err := pg.monitor.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
WHERE datname = $1 AND state = 'active' AND query = $2`, appDB, want).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the query did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sleepChildEnv makes the test binary a child of
// TestSleepCanceledFailsCleanly.
const sleepChildEnv = "PGTURNSTILE_IT_SLEEP_CHILD"

// TestSleepCanceledFailsCleanly (issue 32, item 12): when sleepCanceled
// fails (here: waitSleeping never sees the query), the test fails with its
// own message only. Its query goroutine used the pgx conn that the
// conn's Cleanup closed, and under -race the run also failed with a data
// race. The failure is played in a child process of this test binary.
func TestSleepCanceledFailsCleanly(t *testing.T) {
	needPG(t)
	if os.Getenv(sleepChildEnv) != "" {
		p := startPooler(t, iniSettings(nil, ""), testUserlist)
		sleepCanceled(t, connectPgx(t, p.App()), func() {})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSleepCanceledFailsCleanly$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), sleepChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("the child must fail: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "the query did not start") {
		t.Errorf("the child's failure does not say why:\n%s", out)
	}
	for _, bad := range []string{"DATA RACE", "race detected", "panic:"} {
		if strings.Contains(string(out), bad) {
			t.Errorf("the child failed with %q besides its own message:\n%s", bad, out)
		}
	}
}

// TestRollingRestart: two poolers on one port (so_reuseport) serve clients
// that loop connect → transaction → disconnect; the first gets SIGTERM
// (SHUTDOWN WAIT_FOR_CLIENTS: its TCP listener closes, its clients finish)
// and a third starts on the port. No transaction fails, and the first
// exits once its clients have left. Then a cancel request that reaches the
// wrong process (sent to the other one's Unix socket) cancels the query.
func TestRollingRestart(t *testing.T) {
	needPG(t)
	dirs := []string{"", t.TempDir(), t.TempDir(), t.TempDir()}
	p1 := startPooler(t, peerIni(1, "127.0.0.1", 0, dirs[1], ""), testUserlist)
	port := p1.Port
	peers := ""
	for id := 1; id <= 3; id++ {
		peers += fmt.Sprintf("%d = host=%s port=%d\n", id, dirs[id], port)
	}
	startPooler(t, peerIni(2, "127.0.0.1", port, dirs[2], peers), testUserlist)
	p1.WriteConfig(peerIni(1, "127.0.0.1", 0, dirs[1], peers), testUserlist)
	p1.Reload() // [peers] applies on RELOAD

	// A cancel request that reaches the other process is forwarded to
	// the one that owns the query: both ways.
	seen := map[int]bool{}
	for try := 0; try < 40 && len(seen) < 2; try++ {
		conn := connectPgx(t, p1.App()) // the port: either process
		owner := keyPeer(conn)
		if owner != 1 && owner != 2 {
			t.Fatalf("cancel key carries peer %d", owner)
		}
		if seen[owner] {
			conn.Close(context.Background())
			continue
		}
		seen[owner] = true
		other := 3 - owner
		sleepCanceled(t, conn, func() {
			sendCancel(t, conn, "unix", filepath.Join(dirs[other], fmt.Sprintf(".s.PGSQL.%d", port)))
		})
		conn.Close(context.Background())
	}
	if len(seen) < 2 {
		t.Fatalf("40 connections all went to peer(s) %v", seen)
	}

	// A connection the kernel had queued on the first process's TCP
	// listener when it closed is reset, unless net.ipv4.tcp_migrate_req
	// (Linux 5.14+) moves it to another listener of the port: PgBouncer's
	// rolling restart has the same limit. Without it, a connect reset so
	// is retried, as a client pool would, and counted; with it, nothing
	// may fail at all.
	migrate := tcpMigrateReq()
	var ok, failed, resets, phase atomic.Int64
	var errMu sync.Mutex
	var errs []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	cfg := pgxConfig(t, p1.App())
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := oneTransaction(cfg)
				switch {
				case err == nil:
					ok.Add(1)
				case !migrate && errors.Is(err, errConnectReset):
					resets.Add(1)
				default:
					failed.Add(1)
					errMu.Lock()
					errs = append(errs, fmt.Sprintf("phase %d: %v", phase.Load(), err))
					errMu.Unlock()
				}
			}
		})
	}
	waitOK := func(n int64, what string) {
		t.Helper()
		target := ok.Load() + n
		deadline := time.Now().Add(20 * time.Second)
		for ok.Load() < target {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d transactions, %d failed", what, ok.Load(), failed.Load())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitOK(100, "before the restart")
	phase.Store(1)
	p1.signal(t, syscall.SIGTERM)
	if !p1.WaitLog("got SIGTERM", 5*time.Second) {
		t.Fatal("no SIGTERM line")
	}
	waitOK(100, "after SIGTERM")
	phase.Store(2)
	p3 := startPooler(t, peerIni(3, "127.0.0.1", port, dirs[3], peers), testUserlist)
	if code, ok := p1.waitExit(t, 10*time.Second); !ok || code != 0 {
		t.Fatalf("the first pooler did not exit (exited: %v, code %d) once its clients left; log:\n%s", ok, code, p1.Log())
	}
	phase.Store(3)
	waitOK(100, "after the first exited")
	close(stop)
	wg.Wait()
	if !p3.LogContains("appdb/app@127.0.0.1:") {
		t.Error("the third pooler served no client on the shared port")
	}
	if failed.Load() != 0 {
		t.Errorf("%d of %d transactions failed: %q", failed.Load(), ok.Load()+failed.Load(), errs[:min(len(errs), 5)])
	}
	t.Logf("%d transactions across the restart; %d connects reset by the kernel and retried (tcp_migrate_req on: %v)", ok.Load(), resets.Load(), migrate)

	// The new process takes part in the group: a query on p3 is
	// cancelled through p2's Unix socket.
	conn := connectPgx(t, strings.Replace(p3.App(), "host=127.0.0.1", "host="+dirs[3], 1))
	if keyPeer(conn) != 3 {
		t.Fatalf("p3's key carries peer %d", keyPeer(conn))
	}
	sleepCanceled(t, conn, func() {
		sendCancel(t, conn, "unix", filepath.Join(dirs[2], fmt.Sprintf(".s.PGSQL.%d", port)))
	})
}

// tcpMigrateReq reports whether net.ipv4.tcp_migrate_req is on.
func tcpMigrateReq() bool {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_migrate_req")
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// errConnectReset marks a connect the kernel reset: the TCP connection
// was reset before the pooler's first message.
var errConnectReset = errors.New("connect reset")

// oneTransaction connects, runs BEGIN; SELECT 1; COMMIT and disconnects.
func oneTransaction(cfg *pgx.ConnConfig) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		if errors.Is(err, syscall.ECONNRESET) {
			return fmt.Errorf("%w: %w", errConnectReset, err)
		}
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	var one int
	if err := tx.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return err
	}
	if one != 1 {
		return errors.New("SELECT 1 returned another number")
	}
	return tx.Commit(ctx)
}

// TestPeeringAcrossHosts: two poolers on two "hosts" (127.0.0.1 and
// 127.0.0.2), each with the other in [peers]; a query on the first is
// cancelled by pgconn's CancelRequest sent to the second, which forwards
// it.
func TestPeeringAcrossHosts(t *testing.T) {
	needPG(t)
	a := startPooler(t, peerIni(1, "127.0.0.1", 0, "", ""), testUserlist)
	// The harness finds a pooler by its 127.0.0.1 line; host B's own
	// address is 127.0.0.2, listed first, so the port is picked there.
	b := startPooler(t, peerIni(2, "127.0.0.2,127.0.0.1", 0, "", fmt.Sprintf("1 = host=127.0.0.1 port=%d\n", a.Port)), testUserlist)
	a.WriteConfig(peerIni(1, "127.0.0.1", 0, "", fmt.Sprintf("2 = host=127.0.0.2 port=%d\n", b.Port)), testUserlist)
	a.Reload()
	if !b.LogContains(fmt.Sprintf("listening on 127.0.0.2:%d", b.Port)) {
		t.Fatalf("B is not on 127.0.0.2:%d:\n%s", b.Port, b.Log())
	}

	// pgconn sends the CancelRequest to the address the connection has;
	// this dialer sends it to host B instead.
	var toB atomic.Bool
	cfg := pgxConfig(t, a.App())
	dialer := &net.Dialer{}
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if toB.Load() {
			addr = fmt.Sprintf("127.0.0.2:%d", b.Port)
		}
		return dialer.DialContext(ctx, network, addr)
	}
	conn, err := tryConnectPgx(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if keyPeer(conn) != 1 {
		t.Fatalf("A's key carries peer %d", keyPeer(conn))
	}
	sleepCanceled(t, conn, func() {
		toB.Store(true)
		if err := conn.PgConn().CancelRequest(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	if got := queryInt(t, conn, "SELECT 1"); got != 1 {
		t.Fatalf("after the cancel: %d", got)
	}
}

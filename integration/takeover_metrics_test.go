//go:build linux

package integration

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Issue 32, item 3: an online restart with metrics_addr set, while a
// client the old process cannot hand over keeps it running, used to end
// in an outage: the new process took the listeners, could not bind the
// metrics port (the old process's still) and exited. The metrics listener
// now moves with the others: the new process serves both ports, the old
// one its last client.
func TestOnlineRestartMetricsHandedOver(t *testing.T) {
	needPG(t)
	sock := t.TempDir()
	maddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	p1 := startPooler(t, iniSettings(map[string]string{"unix_socket_dir": sock, "metrics_addr": maddr},
		"[databases]\nsessdb = host=127.0.0.1 port=@PGPORT@ dbname="+appDB+" pool_mode=session"), testUserlist)
	// A session-mode client in a transaction: it cannot move.
	sess := connectPgx(t, p1.ConnString("sessdb", appUser, appPassword))
	if _, err := sess.Exec(ctxT(t, 5*time.Second), "BEGIN"); err != nil {
		t.Fatal(err)
	}

	p2 := startReboot(t, p1, nil)
	p1.stopped.Store(true) // it exits by itself once its client left
	if !p2.WaitLog("metrics listening on "+maddr+" (inherited)", 20*time.Second) {
		t.Fatalf("the new process did not take the metrics listener over; its log:\n%s\nold log:\n%s", p2.Log(), p1.Log())
	}
	if !p2.WaitLog("process up", 10*time.Second) {
		t.Fatalf("the new process is not up; its log:\n%s", p2.Log())
	}
	// Both ports answer, and it is the new process that serves them.
	selectOne(t, p1.App())
	resp, err := http.Get("http://" + maddr + "/metrics")
	if err != nil {
		t.Fatalf("metrics after the restart: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(body) == 0 {
		t.Errorf("metrics after the restart: %s, %d bytes", resp.Status, len(body))
	}
	p2.Alive(t)
	// The old process serves its last client, then exits.
	var one int
	if err := sess.QueryRow(ctxT(t, 5*time.Second), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Errorf("the session client on the old process: %d, %v", one, err)
	}
	sess.Close(context.Background())
	select {
	case <-p1.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the old process did not exit after its last client; its log:\n%s", p1.Log())
	}
	selectOne(t, p1.App())
}

// TestOnlineRestartFailureGivesBack: the new process fails after it got
// the listeners and clients (here: its metrics_addr is taken by someone
// else). It gives the takeover up before the old process let go of
// anything: the old process resumes, its client goes on, new clients
// connect, and the new process exits 1 with the reason.
func TestOnlineRestartFailureGivesBack(t *testing.T) {
	needPG(t)
	sock := t.TempDir()
	p1 := startPooler(t, iniSettings(map[string]string{"unix_socket_dir": sock}, ""), testUserlist)
	a := connectPgx(t, p1.App())
	defer a.Close(context.Background())
	if n := queryInt(t, a, "SELECT 1"); n != 1 {
		t.Fatal(n)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	p2 := startReboot(t, p1, func(ini string) string {
		return strings.Replace(ini, "[pgbouncer]\n", "[pgbouncer]\nmetrics_addr = "+taken.Addr().String()+"\n", 1)
	})
	select {
	case <-p2.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the new process did not exit; its log:\n%s", p2.Log())
	}
	p2.stopped.Store(true)
	if !p2.LogContains("cannot listen for metrics") || !p2.LogContains("takeover given up: the old process goes on") {
		t.Errorf("the new process did not say why it gave up; its log:\n%s", p2.Log())
	}
	// The old process goes on: its client, new clients, its console.
	var n int
	if err := a.QueryRow(ctxT(t, 10*time.Second), "SELECT 2").Scan(&n); err != nil || n != 2 {
		t.Errorf("the old process's client after the failed takeover: %d, %v; old log:\n%s", n, err, p1.Log())
	}
	selectOne(t, p1.App())
	if out, stderr, err := psqlAsPooler(t, "", "-X", "-tA", "-h", sock, "-p", strconv.Itoa(p1.Port), "-U", "pgbouncer", "-d", "pgbouncer", "-c", "SHOW VERSION"); err != nil {
		t.Errorf("the old process's console over its Unix socket: %v %s %s", err, out, stderr)
	}
	p1.Alive(t)
}

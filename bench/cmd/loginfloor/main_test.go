//go:build linux

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/internal/netpoll"
	"github.com/pgturnstile/pgturnstile/internal/pgtest"
)

// startPostgres starts a throwaway PostgreSQL with a SCRAM role floor and
// returns its TCP port and the role's secret from pg_authid.
func startPostgres(t *testing.T) (port int, secret string) {
	t.Helper()
	d, err := pgtest.InitDB("pgturnstile-loginfloor-", "scram-sha-256")
	if d != nil {
		t.Cleanup(func() { os.RemoveAll(d.Root) })
	}
	if err != nil {
		t.Fatal(err)
	}
	if port, err = pgtest.FreePort(); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(d.Log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(pgtest.BinDir, "postgres"), "-D", d.Data, "-p", strconv.Itoa(port), "-k", d.Socket,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off")
	cmd.Dir, cmd.Stdout, cmd.Stderr = d.Root, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: d.Cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGQUIT); cmd.Wait() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	su := fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable", d.Socket, port)
	var c *pgconn.PgConn
	for {
		if c, err = pgconn.Connect(ctx, su); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("postgres did not start: %v\n%s", err, pgtest.TailFile(d.Log, 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer c.Close(ctx)
	rs, err := c.Exec(ctx, "CREATE ROLE floor LOGIN PASSWORD 'floorpw'; SELECT rolpassword FROM pg_authid WHERE rolname = 'floor'").ReadAll()
	if err != nil || len(rs) != 2 || len(rs[1].Rows) != 1 {
		t.Fatalf("role: %v %v", err, rs)
	}
	return port, string(rs[1].Rows[0][0])
}

// TestFloorServesLogins: each design logs a client in with SCRAM against
// the role's secret, refuses a wrong password, and runs queries on its
// servers, more clients at once than it has servers.
func TestFloorServesLogins(t *testing.T) {
	pgPort, secretText := startPostgres(t)
	secret, err := auth.ParseSecret(secretText)
	if err != nil || secret.Kind != auth.SecretSCRAM {
		t.Fatalf("secret %v %v", secret, err)
	}
	to := fmt.Sprintf("host=127.0.0.1 port=%d user=floor password=floorpw dbname=postgres sslmode=disable", pgPort)
	for _, mode := range []string{"goroutines", "raw", "epoll"} {
		t.Run(mode, func(t *testing.T) {
			f, err := newFloor(to, 2, "floor", secret, mode == "raw")
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			switch mode {
			case "goroutines":
				go f.serve(ln)
			case "raw":
				a, ok := netpoll.NewAcceptor(ln)
				if !ok {
					t.Fatal("no raw acceptor")
				}
				go f.serveRaw(a)
			case "epoll":
				go f.serveEpoll(ln.(*net.TCPListener))
			}
			port := ln.Addr().(*net.TCPAddr).Port
			connString := func(pw string) string {
				return fmt.Sprintf("host=127.0.0.1 port=%d user=floor password=%s dbname=floor sslmode=disable", port, pw)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			if c, err := pgconn.Connect(ctx, connString("wrong")); err == nil {
				c.Close(ctx)
				t.Fatal("a wrong password logged in")
			}
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for i := range 8 { // 8 clients, 2 servers
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, err := pgconn.Connect(ctx, connString("floorpw"))
					if err != nil {
						errs <- err
						return
					}
					defer c.Close(ctx)
					if got := c.ParameterStatus("server_version"); got == "" {
						errs <- fmt.Errorf("client %d: no server_version in the welcome", i)
					}
					for q := range 3 {
						want := strconv.Itoa(100*i + q)
						rs, err := c.Exec(ctx, "SELECT "+want).ReadAll()
						if err != nil || len(rs) != 1 || len(rs[0].Rows) != 1 || string(rs[0].Rows[0][0]) != want {
							errs <- fmt.Errorf("client %d query %d: %v %v, want %s", i, q, err, rs, want)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

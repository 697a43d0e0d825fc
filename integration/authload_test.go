//go:build linux

package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// readMsg reads one backend message.
func readMsg(r io.Reader) (typ byte, body []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n < 4 || n > 1<<20 {
		return 0, nil, fmt.Errorf("bad message length %d (type %q)", n, hdr[0])
	}
	body = make([]byte, n-4)
	_, err = io.ReadFull(r, body)
	return hdr[0], body, err
}

// errorFields parses an ErrorResponse body into its fields (S, C, M, …).
func errorFields(body []byte) map[byte]string {
	f := map[byte]string{}
	for len(body) > 1 {
		code := body[0]
		end := bytes.IndexByte(body[1:], 0)
		if end < 0 {
			break
		}
		f[code] = string(body[1 : 1+end])
		body = body[2+end:]
	}
	return f
}

// stalledLogin is what a slow client saw: when the pooler closed the
// connection (since the dial), and the error it sent first, if any.
type stalledLogin struct {
	name   string
	closed time.Duration
	fatal  map[byte]string
	err    error // anything unexpected before the stall
}

// awaitClose reads until the pooler closes conn, keeping the first
// ErrorResponse; it gives up after limit.
func awaitClose(conn net.Conn, dialed time.Time, limit time.Duration, res *stalledLogin) {
	_ = conn.SetReadDeadline(dialed.Add(limit))
	for {
		typ, body, err := readMsg(conn)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				res.err = fmt.Errorf("still open after %v", limit)
				return
			}
			res.closed = time.Since(dialed)
			return
		}
		if typ == 'E' && res.fatal == nil {
			res.fatal = errorFields(body)
		}
	}
}

// TestLoginTimeoutSlowloris: with client_login_timeout=1, a client that
// trickles its startup packet a byte per 200 ms, one that sends nothing,
// and one that abandons SCRAM after the server's first message are all cut
// about a second after they connected, with FATAL 08P01
// client_login_timeout, and no Postgres backend is held for them.
func TestLoginTimeoutSlowloris(t *testing.T) {
	needPG(t)
	waitNoBackends(t, appDB, appUser)
	p := startPooler(t, iniSettings(map[string]string{
		"auth_type":            "scram-sha-256",
		"client_login_timeout": "1",
		"default_pool_size":    "1",
	}, ""), testUserlist)
	const limit = 6 * time.Second

	trickle := func(res *stalledLogin) {
		dialed := time.Now()
		conn, err := net.Dial("tcp", p.Addr())
		if err != nil {
			res.err = err
			return
		}
		defer conn.Close()
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for _, b := range startupPacket("user", appUser, "database", appDB) {
				if _, err := conn.Write([]byte{b}); err != nil {
					return
				}
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
			}
		}()
		awaitClose(conn, dialed, limit, res)
	}
	silent := func(res *stalledLogin) {
		dialed := time.Now()
		conn, err := net.Dial("tcp", p.Addr())
		if err != nil {
			res.err = err
			return
		}
		defer conn.Close()
		awaitClose(conn, dialed, limit, res)
	}
	scramHalf := func(res *stalledLogin) {
		dialed := time.Now()
		conn, err := net.Dial("tcp", p.Addr())
		if err != nil {
			res.err = err
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(dialed.Add(limit))
		if _, err := conn.Write(startupPacket("user", appUser, "database", appDB)); err != nil {
			res.err = err
			return
		}
		typ, body, err := readMsg(conn)
		if err != nil || typ != 'R' || len(body) < 4 || binary.BigEndian.Uint32(body) != 10 {
			res.err = fmt.Errorf("want AuthenticationSASL, got %q %q %v", typ, body, err)
			return
		}
		if !bytes.Contains(body, []byte("SCRAM-SHA-256\x00")) {
			res.err = fmt.Errorf("AuthenticationSASL without SCRAM-SHA-256: %q", body)
			return
		}
		nonce := make([]byte, 18)
		_, _ = rand.Read(nonce)
		first := "n,,n=,r=" + base64.StdEncoding.EncodeToString(nonce)
		var msg []byte
		msg = append(msg, "SCRAM-SHA-256\x00"...)
		msg = binary.BigEndian.AppendUint32(msg, uint32(len(first)))
		msg = append(msg, first...)
		msg = append(append([]byte{'p'}, binary.BigEndian.AppendUint32(nil, uint32(len(msg)+4))...), msg...)
		if _, err := conn.Write(msg); err != nil {
			res.err = err
			return
		}
		typ, body, err = readMsg(conn)
		if err != nil || typ != 'R' || len(body) < 4 || binary.BigEndian.Uint32(body) != 11 {
			res.err = fmt.Errorf("want AuthenticationSASLContinue, got %q %q %v", typ, body, err)
			return
		}
		// Abandon the exchange: never send the client-final message.
		awaitClose(conn, dialed, limit, res)
	}

	results := []*stalledLogin{{name: "trickled startup"}, {name: "silent"}, {name: "SCRAM abandoned"}}
	var wg sync.WaitGroup
	for i, f := range []func(*stalledLogin){trickle, silent, scramHalf} {
		wg.Add(1)
		go func() { defer wg.Done(); f(results[i]) }()
	}
	wg.Wait()
	for _, r := range results {
		switch {
		case r.err != nil:
			t.Errorf("%s: %v", r.name, r.err)
		case r.closed < 900*time.Millisecond || r.closed > 2500*time.Millisecond:
			t.Errorf("%s: closed %v after connecting, want about 1 s (client_login_timeout=1)", r.name, r.closed)
		default:
			t.Logf("%s: closed after %v", r.name, r.closed.Round(time.Millisecond))
		}
		if r.err == nil && (r.fatal == nil || r.fatal['S'] != "FATAL" || r.fatal['C'] != "08P01" || r.fatal['M'] != "client_login_timeout") {
			t.Errorf("%s: error before the close %v, want FATAL 08P01 client_login_timeout", r.name, r.fatal)
		}
	}
	if n := countBackends(t, appDB, appUser); n != 0 {
		t.Errorf("%d Postgres backends for app after the stalled logins, want 0", n)
	}
	// The one server slot is free: a real client logs in and works.
	start := time.Now()
	selectOne(t, p.App())
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a good login after the stalled ones took %v", d)
	}
}

// TestBadLoginBurst: 200 failing logins at once (100 wrong passwords, 100
// unknown users, SCRAM) do not block 20 good logins started in the same
// window: each good one logs in and runs a query.
func TestBadLoginBurst(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{
		"auth_type":       "scram-sha-256",
		"max_client_conn": "400",
	}, ""), testUserlist)
	const bad, good = 200, 20

	go1 := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	unexpected := map[string]int{}
	var goodErrs []string
	var slowest time.Duration
	for i := 0; i < bad; i++ {
		user, password := appUser, fmt.Sprintf("wrong-%d", i)
		if i%2 == 1 {
			user = fmt.Sprintf("ghost%d", i)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-go1
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := pgconn.Connect(ctx, p.ConnString(appDB, user, password))
			var pgErr *pgconn.PgError
			if err == nil {
				_ = c.Close(ctx)
			}
			if !errors.As(err, &pgErr) || pgErr.Code != "28P01" || pgErr.Message != "SASL authentication failed" {
				mu.Lock()
				unexpected[fmt.Sprint(err)]++
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < good; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-go1
			time.Sleep(time.Duration(i) * 25 * time.Millisecond) // spread over the burst
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := func() error {
				c, err := pgconn.Connect(ctx, p.App())
				if err != nil {
					return err
				}
				defer c.Close(ctx)
				res, err := c.Exec(ctx, "SELECT current_user").ReadAll()
				if err != nil {
					return err
				}
				if len(res) != 1 || len(res[0].Rows) != 1 || string(res[0].Rows[0][0]) != appUser {
					return fmt.Errorf("SELECT current_user: %v", res)
				}
				return nil
			}()
			d := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			if d > slowest {
				slowest = d
			}
			if err != nil {
				goodErrs = append(goodErrs, fmt.Sprintf("good login %d after %v: %v", i, d.Round(time.Millisecond), err))
			}
		}()
	}
	start := time.Now()
	close(go1)
	wg.Wait()
	t.Logf("%d bad + %d good logins in %v; slowest good login %v", bad, good, time.Since(start).Round(time.Millisecond), slowest.Round(time.Millisecond))
	for _, e := range goodErrs {
		t.Error(e)
	}
	for e, n := range unexpected {
		t.Errorf("%d bad logins ended with %s, want FATAL 28P01 SASL authentication failed", n, e)
	}
	if len(goodErrs) == 0 && slowest > 20*time.Second {
		t.Errorf("slowest good login took %v", slowest)
	}
	p.Alive(t)
	noSecretsInLog(t, p, appPassword, "wrong-1")
	if strings.Contains(p.Log(), "panic") {
		t.Errorf("pooler log mentions a panic")
	}
}

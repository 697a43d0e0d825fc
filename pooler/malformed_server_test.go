package pooler

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/wire"
)

// startMalformedServer is a fakePostgres whose connections log in as the
// fake's do and then answer a Query containing "hostile" with reply as it
// is, and any other Query with an empty SELECT. closed receives once for
// each connection the pooler closes.
func startMalformedServer(t *testing.T, reply []byte) (f *fakePostgres, closed chan struct{}) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f = &fakePostgres{ln: ln, conns: map[net.Conn]struct{}{}}
	closed = make(chan struct{}, 16)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns[c] = struct{}{}
			f.wg.Add(1)
			f.mu.Unlock()
			go func() {
				defer f.wg.Done()
				defer c.Close()
				fc := &fakeConn{f: f, id: 1, c: c, tx: 'I'}
				if !fc.login() {
					return
				}
				r := wire.NewReader(c, wire.DefaultBufferSize)
				for {
					typ, _, err := r.Next()
					if err != nil {
						if errors.Is(err, io.EOF) {
							closed <- struct{}{}
						}
						return
					}
					body, err := r.Body()
					if err != nil {
						return
					}
					if typ != wire.MsgQuery {
						continue
					}
					out := reply
					if !strings.Contains(string(body), "hostile") {
						out = []byte("C\x00\x00\x00\x0dSELECT 0\x00Z\x00\x00\x00\x05I")
					}
					if _, err := c.Write(out); err != nil {
						return
					}
				}
			}()
		}
	}()
	return f, closed
}

// A server whose ReadyForQuery or CommandComplete has no body (no
// PostgreSQL sends one; a broken proxy might) must not make the pooler
// index past the body: a ReadyForQuery without its status loses the
// server (it is closed and the client told, as when a server hangs up), a
// body-less CommandComplete is passed on like any other.
func TestMalformedServerReplies(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings string
		reply    string
		lost     bool // the pooler must close the server
	}{
		{"ReadyForQuery without status", "", "C\x00\x00\x00\x0dSELECT 1\x00Z\x00\x00\x00\x04", true},
		{"CommandComplete without tag, statements mapped", "pool_mode = transaction\nmax_prepared_statements = 10\n", "C\x00\x00\x00\x04Z\x00\x00\x00\x05I", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake, closed := startMalformedServer(t, []byte(tc.reply))
			tp := startTestPooler(t, fake, map[string]string{"h": ""}, tc.settings)
			defer tp.shutdown(t, fake)

			conn, err := net.Dial("tcp", tp.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			br := newBackendReader(conn)
			if _, err := conn.Write(startupPacket(0, [][2]string{{"user", "u"}, {"database", "h"}})); err != nil {
				t.Fatal(err)
			}
			for {
				typ, body, err := br.next()
				if err != nil || typ == 'E' {
					t.Fatalf("login: %q %q %v", typ, body, err)
				}
				if typ == 'Z' {
					break
				}
			}
			if _, err := conn.Write(wire.AppendQuery(nil, "SELECT hostile")); err != nil {
				t.Fatal(err)
			}
			var got []byte
			for {
				typ, body, err := br.next()
				if err != nil && typ == 0 {
					break // the pooler hung up
				}
				got = append(got, typ)
				if typ == 'E' && !strings.Contains(string(body), "C08P01\x00Mserver conn crashed?\x00") {
					t.Errorf("error %q, want 08P01 server conn crashed?", body)
				}
				if typ == 'Z' || typ == 'E' {
					break
				}
			}
			if tc.lost {
				if string(got) != "CE" {
					t.Errorf("client got %q, want CommandComplete then the error", got)
				}
				select {
				case <-closed:
				case <-time.After(5 * time.Second):
					t.Error("the pooler kept the server")
				}
			} else if string(got) != "CZ" {
				t.Errorf("client got %q, want CommandComplete and ReadyForQuery", got)
			}
			if p := tp.log.takePanics(); len(p) > 0 {
				t.Errorf("the pooler panicked:\n%s", strings.Join(p, "\n"))
			}
		})
	}
}

//go:build linux

// Command loginfloor is a measuring stick for issue 22's login criterion:
// the least a Go server with a goroutine per connection can spend on what
// `pgbench -S -C` asks of a pooler, so that its CPU per connection, beside
// PgBouncer's, shows how much of pgturnstile's login cost is the design's
// and how much is pgturnstile's own.
//
// Per connection it does what a pooler must and nothing else: accept (net),
// read the startup packet (answering an SSLRequest with N), the SCRAM
// exchange against a SCRAM secret with pgturnstile's own auth package, one
// write of AuthenticationOk, PgBouncer's set of ParameterStatus messages,
// BackendKeyData and ReadyForQuery, then for each Query a server taken from
// a fixed set logged in at start, the query written to it, its replies read
// up to ReadyForQuery and written to the client in one write, the server
// put back; Terminate or EOF closes. No configuration, no limits, no
// parameter tracking, no statistics, no logging, no deadlines, no
// admission, no cancel keys kept: everything pgturnstile adds is missing,
// so pgturnstile cannot get below this floor by tuning alone.
//
// Measure it as the poolers (bench/README.md, "The floor of a Go login").
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/internal/netpoll"
	"github.com/pgturnstile/pgturnstile/internal/procscale"
	"github.com/pgturnstile/pgturnstile/wire"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:24100", "address to listen on")
	to := flag.String("to", "", "libpq connection string of the servers (PostgreSQL)")
	servers := flag.Int("servers", 20, "servers logged in at start")
	user := flag.String("user", "bench", "the one user clients log in as")
	secretFile := flag.String("secret", "", "file holding the user's SCRAM secret (as in pg_authid)")
	mode := flag.String("mode", "goroutines", "goroutines (net, a goroutine per client), "+
		"raw (pgturnstile's socket layer: clients accepted and served by internal/netpoll, servers' reads and writes "+
		"by wire.SocketIO, goroutines reused, GOMAXPROCS set by internal/procscale) or epoll (one event loop)")
	flag.Parse()
	raw := *mode == "raw"
	b, err := os.ReadFile(*secretFile)
	if err != nil {
		log.Fatal("loginfloor: ", err)
	}
	secret, err := auth.ParseSecret(string(trimNL(b)))
	if err != nil || secret.Kind != auth.SecretSCRAM {
		log.Fatalf("loginfloor: %s: not a SCRAM secret (%v)", *secretFile, err)
	}
	f, err := newFloor(*to, *servers, *user, secret, raw)
	if err != nil {
		log.Fatal("loginfloor: ", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal("loginfloor: ", err)
	}
	fmt.Fprintln(os.Stderr, "loginfloor: listening on", ln.Addr())
	switch *mode {
	case "epoll":
		log.Fatal("loginfloor: ", f.serveEpoll(ln.(*net.TCPListener)))
	case "raw":
		go procscale.Run(context.Background(), procscale.Interval, nil)
		a, ok := netpoll.NewAcceptor(ln)
		if !ok {
			log.Fatal("loginfloor: -raw: no raw acceptor here")
		}
		log.Fatal("loginfloor: ", f.serveRaw(a))
	case "goroutines":
		log.Fatal("loginfloor: ", f.serve(ln))
	}
	log.Fatal("loginfloor: -mode must be goroutines, raw or epoll")
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// floor is the server: its user, secret and servers.
type floor struct {
	user    string
	secret  auth.Secret
	servers chan *upstream
	welcome []byte // AuthenticationOk … ReadyForQuery, the same for all
}

// welcomeParams are the ParameterStatus messages PgBouncer sends a client
// after its login, with the servers' values.
var welcomeParams = []string{"application_name", "client_encoding", "DateStyle", "default_transaction_read_only",
	"in_hot_standby", "integer_datetimes", "IntervalStyle", "is_superuser", "server_encoding", "server_version",
	"session_authorization", "standard_conforming_strings", "TimeZone"}

type upstream struct {
	raw  *net.TCPConn // for the epoll mode
	conn io.ReadWriter
	r    *bufio.Reader
}

func newFloor(connString string, n int, user string, secret auth.Secret, raw bool) (*floor, error) {
	f := &floor{user: user, secret: secret, servers: make(chan *upstream, n)}
	params := map[string]string{}
	for range n {
		pc, err := pgconn.Connect(context.Background(), connString)
		if err != nil {
			return nil, err
		}
		for _, name := range welcomeParams {
			params[name] = pc.ParameterStatus(name)
		}
		hj, err := pc.Hijack()
		if err != nil {
			return nil, err
		}
		var rw io.ReadWriter = hj.Conn
		if raw {
			rw = wire.SocketIO(hj.Conn)
		}
		tc, _ := hj.Conn.(*net.TCPConn)
		f.servers <- &upstream{raw: tc, conn: rw, r: bufio.NewReaderSize(rw, 8192)}
	}
	w := (&pgproto3.AuthenticationOk{}).Encode
	out, _ := w(nil)
	for _, name := range welcomeParams {
		if v := params[name]; v != "" {
			out, _ = (&pgproto3.ParameterStatus{Name: name, Value: v}).Encode(out)
		}
	}
	out, _ = (&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 2}}).Encode(out)
	out, _ = (&pgproto3.ReadyForQuery{TxStatus: 'I'}).Encode(out)
	f.welcome = out
	return f, nil
}

func (f *floor) serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go f.client(c)
	}
}

// serveRaw is serve over pgturnstile's raw acceptor, each client on an
// idle goroutine a finished client left where there is one.
func (f *floor) serveRaw(a *netpoll.Acceptor) error {
	idle := make(chan net.Conn)
	work := func(c net.Conn) { // idle workers wait for good: as many as clients were at once
		for {
			f.client(c)
			c = <-idle
		}
	}
	for {
		c, err := a.Accept()
		if err != nil {
			return err
		}
		select {
		case idle <- c:
		default:
			go work(c)
		}
	}
}

// client is one connection's goroutine.
func (f *floor) client(c net.Conn) {
	defer c.Close()
	cc := &clientConn{conn: c, r: bufio.NewReaderSize(c, 8192)}
	if err := cc.startup(f.user); err != nil {
		return
	}
	if _, err := auth.Authenticate(cc, auth.MethodSCRAM, f.user, &f.secret); err != nil {
		return
	}
	if _, err := c.Write(f.welcome); err != nil {
		return
	}
	for {
		typ, msg, err := cc.next()
		if err != nil || typ == 'X' {
			return
		}
		if typ != 'Q' {
			return
		}
		if err := f.query(c, msg); err != nil {
			return
		}
	}
}

// query runs one simple-protocol query on a server and relays its replies
// to the client in one write.
func (f *floor) query(c net.Conn, msg []byte) error {
	s := <-f.servers
	defer func() { f.servers <- s }()
	if _, err := s.conn.Write(msg); err != nil {
		return err
	}
	var out []byte
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
			return err
		}
		n := int(binary.BigEndian.Uint32(hdr[1:])) - 4
		if n < 0 || n > 1<<20 {
			return errors.New("bad server message")
		}
		out = append(out, hdr[:]...)
		start := len(out)
		out = append(out, make([]byte, n)...)
		if _, err := io.ReadFull(s.r, out[start:]); err != nil {
			return err
		}
		if hdr[0] == 'Z' {
			break
		}
	}
	_, err := c.Write(out)
	return err
}

// clientConn is auth.Conn over the client's socket.
type clientConn struct {
	conn net.Conn
	r    *bufio.Reader
	buf  []byte
	out  []byte
}

// startup reads the startup packet, answering an SSLRequest with N, and
// checks the user.
func (cc *clientConn) startup(user string) error {
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(cc.r, hdr[:]); err != nil {
			return err
		}
		n := int(binary.BigEndian.Uint32(hdr[:])) - 4
		if n < 4 || n > 10000 {
			return errors.New("bad startup packet")
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(cc.r, body); err != nil {
			return err
		}
		code := binary.BigEndian.Uint32(body)
		if code == 80877103 { // SSLRequest
			if _, err := cc.conn.Write([]byte{'N'}); err != nil {
				return err
			}
			continue
		}
		if code != 196608 {
			return errors.New("unsupported protocol")
		}
		if startupUser(body[4:]) != user { // epoll.go
			return errors.New("unknown user")
		}
		return nil
	}
}

func (cc *clientConn) next() (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(cc.r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[1:])) - 4
	if n < 0 || n > 1<<20 {
		return 0, nil, errors.New("bad message")
	}
	cc.buf = append(cc.buf[:0], hdr[:]...)
	cc.buf = append(cc.buf, make([]byte, n)...)
	if _, err := io.ReadFull(cc.r, cc.buf[5:]); err != nil {
		return 0, nil, err
	}
	return hdr[0], cc.buf, nil
}

func (cc *clientConn) Send(msg pgproto3.BackendMessage) error {
	var err error
	cc.out, err = msg.Encode(cc.out[:0])
	if err != nil {
		return err
	}
	_, err = cc.conn.Write(cc.out)
	return err
}

func (cc *clientConn) ReadPassword() ([]byte, error) {
	typ, msg, err := cc.next()
	if err != nil {
		return nil, err
	}
	if typ != 'p' {
		return nil, errors.New("expected a password message")
	}
	return msg[5:], nil
}

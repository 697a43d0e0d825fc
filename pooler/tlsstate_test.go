package pooler

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/internal/testcert"
	"github.com/pgturnstile/pgturnstile/internal/tlsset"
	"github.com/pgturnstile/pgturnstile/wire"
)

// A certificate is rotated from the console one SET at a time, as
// PgBouncer's suite does: between the key's SET and the certificate's the
// pair does not match. Each value is kept (SHOW CONFIG shows it), the SET
// answers with PgBouncer's NOTICE, and the TLS in force stays the old one
// until the set is consistent; then clients get the new certificate.
func TestClientTLSRotatedOneSetAtATime(t *testing.T) {
	ca1, ca2 := newTestCA(t, "one"), newTestCA(t, "two")
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"db": ""}, "client_tls_sslmode = require\n"+
		"client_tls_key_file = "+ca1.key+"\nclient_tls_cert_file = "+ca1.cert+"\nclient_tls_ca_file = "+ca1.caFile+"\n")
	defer tp.shutdown(t, fake)
	con := tp.svc.Console()
	if err := clientHandshake(tp.addr, ca1.pool); err != nil {
		t.Fatalf("before the rotation, a client trusting CA one: %v", err)
	}

	err := con.Set("client_tls_key_file", ca2.key)
	var n *admin.Notice
	if !errors.As(err, &n) || n.Message != "TLS settings could not be applied, still using old configuration" {
		t.Fatalf("SET of the new key alone: %v; want the NOTICE", err)
	}
	if got := tp.svc.settings().ClientTLSKeyFile; got != ca2.key {
		t.Errorf("client_tls_key_file after its SET = %q; want the value given, %q", got, ca2.key)
	}
	if err := clientHandshake(tp.addr, ca1.pool); err != nil {
		t.Errorf("between the SETs, a client trusting CA one: %v; want the old certificate still served", err)
	}
	// A SET of another key neither applies nor reports the pending TLS.
	if err := con.Set("default_pool_size", "7"); err != nil {
		t.Errorf("SET default_pool_size between the TLS SETs: %v", err)
	}

	if err := con.Set("client_tls_cert_file", ca2.cert); err != nil {
		t.Fatalf("SET of the matching certificate: %v", err)
	}
	if err := con.Set("client_tls_ca_file", ca2.caFile); err != nil {
		t.Fatalf("SET client_tls_ca_file: %v", err)
	}
	if err := clientHandshake(tp.addr, ca2.pool); err != nil {
		t.Errorf("after the rotation, a client trusting CA two: %v", err)
	}
	if err := clientHandshake(tp.addr, ca1.pool); err == nil {
		t.Error("after the rotation, a client trusting only CA one completed the handshake")
	}
}

// RELOAD with a TLS set that does not load applies the rest of the file,
// keeps the TLS in force (client_tls_sslmode included), and fails, as
// PgBouncer's RELOAD does. A server_tls_* set that does not load is kept
// out the same way and closes no server.
func TestReloadKeepsTLSThatDoesNotLoad(t *testing.T) {
	ca1, ca2 := newTestCA(t, "one"), newTestCA(t, "two")
	fake := startFakePostgres(t)
	tls1 := "client_tls_sslmode = require\nclient_tls_key_file = " + ca1.key + "\nclient_tls_cert_file = " + ca1.cert + "\n"
	tp := startTestPooler(t, fake, map[string]string{"db": ""}, tls1)
	defer tp.shutdown(t, fake)

	// The file RELOAD reads: a new key with the old certificate, another
	// mode, another pool size.
	ini := filepath.Join(t.TempDir(), "pgbouncer.ini")
	running := tp.svc.config().Clone()
	running.Path = ini
	if err := tp.svc.Apply(running, true); err != nil {
		t.Fatal(err)
	}
	before := tp.svc.gen.Load().sec
	bad := fmt.Sprintf("[databases]\ndb = host=127.0.0.1 port=%d dbname=fake\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = 0\n%s%s", fake.port(), testPoolerSettings,
		"client_tls_sslmode = allow\nclient_tls_key_file = "+ca2.key+"\nclient_tls_cert_file = "+ca1.cert+"\ndefault_pool_size = 9\n")
	if err := os.WriteFile(ini, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	err := tp.svc.Console().Reload()
	var tna *tlsset.NotAppliedError
	if !errors.As(err, &tna) {
		t.Fatalf("RELOAD with a mismatched key: %v; want a tlsset.NotAppliedError", err)
	}
	if !strings.Contains(tp.log.tail(), "ERROR TLS configuration could not be reloaded, keeping old configuration") {
		t.Errorf("RELOAD does not say it kept the TLS in PgBouncer's words:\n%s", tp.log.tail())
	}
	if got := tp.svc.settings().DefaultPoolSize; got != 9 {
		t.Errorf("default_pool_size after the RELOAD = %d; want 9 (the rest of the file applies)", got)
	}
	sec := tp.svc.gen.Load().sec
	if sec.ClientTLS != before.ClientTLS || sec.ClientMode != "require" {
		t.Errorf("client TLS after the failed set: mode %q, same config %v; want the old one in force", sec.ClientMode, sec.ClientTLS == before.ClientTLS)
	}
	if err := clientHandshake(tp.addr, ca1.pool); err != nil {
		t.Errorf("a client trusting CA one after the failed RELOAD: %v", err)
	}
	if !strings.Contains(tp.log.tail(), "ERROR TLS setup failed: client TLS key pair: ") {
		t.Errorf("the cause is not logged:\n%s", tp.log.tail())
	}

	// server_tls_*: a key without its certificate.
	if err := tp.svc.Console().Set("server_tls_key_file", ca2.key); !errors.As(err, new(*admin.Notice)) {
		t.Fatalf("SET server_tls_key_file alone: %v; want the NOTICE", err)
	}
	if got := tp.svc.gen.Load().sec.ServerTLS; got != before.ServerTLS {
		t.Errorf("server TLS in force after the failed SET: %+v; want %+v", got, before.ServerTLS)
	}
}

// clientHandshake asks the pooler at addr for TLS and completes the
// handshake, trusting roots for 127.0.0.1.
func clientHandshake(addr string, roots *x509.CertPool) error {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(wire.AppendSSLRequest(nil)); err != nil {
		return err
	}
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return err
	}
	if b[0] != 'S' {
		return errors.New("the pooler answered the SSLRequest with " + string(b[:]))
	}
	return tls.Client(conn, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}).Handshake()
}

// testCA is a throwaway CA with a server certificate for 127.0.0.1, as
// PEM files in a temp dir.
type testCA struct {
	caFile, cert, key string
	pool              *x509.CertPool
}

func newTestCA(t *testing.T, name string) testCA {
	t.Helper()
	dir := t.TempDir()
	ca, err := testcert.NewCA(dir, name+" test CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.Issue(dir, "server", testcert.Localhost, nil)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{caFile: ca.File, cert: cert, key: key, pool: ca.Pool}
}

// A server whose certificate fails verification is lost before its login,
// as in PgBouncer: the log says "certificate verify failed", the waiting
// client stays queued for the retry instead of failing, and once
// server_tls_ca_file names the right CA the retry serves it.
func TestServerTLSVerifyFailureKeepsWaiters(t *testing.T) {
	pgCA, other := newTestCA(t, "pg"), newTestCA(t, "other")
	fake := startFakePostgres(t)
	proxy, stopProxy := startTLSProxy(t, pgCA, fake.port())
	redirect := func(s *Service) {
		s.dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, proxy)
		}
	}
	tp := startTestPooler(t, fake, map[string]string{"db": ""}, "server_tls_sslmode = verify-full\n"+
		"server_tls_ca_file = "+other.caFile+"\nserver_login_retry = 1\nquery_wait_timeout = 60\nlog_connections = 1\n", redirect)
	defer tp.shutdown(t, fake)
	defer stopProxy() // first: the pooler's check wants no goroutine of this package left

	done := make(chan error, 1)
	go func() {
		conn, err := connectAndQuery(tp.addr, "db", "SELECT 1")
		if conn != nil {
			conn.Close()
		}
		done <- err
	}()
	waitFor(t, "the failed TLS login to be logged", func() bool {
		return strings.Contains(tp.log.tail(), "certificate verify failed")
	})
	if line := tp.log.tail(); !regexp.MustCompile(`server login failed: closing because: TLS startup failed \(TLS handshake error: certificate verify failed: .* conn=S-\d+ db=db user=\S+ addr=`).MatchString(line) {
		t.Errorf("the failed login is not logged in PgBouncer's words:\n%s", line)
	}
	select {
	case err := <-done:
		t.Fatalf("the client's wait ended when the server's certificate failed verification: %v; want it queued for the retry", err)
	default:
	}
	if err := tp.svc.Console().Set("server_tls_ca_file", pgCA.caFile); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the waiting client after server_tls_ca_file was fixed: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting client was not served after server_tls_ca_file was fixed")
	}
	// log_connections: PgBouncer's line for the server's TLS.
	if re := regexp.MustCompile(`INFO SSL established: TLSv1\.3/TLS_\w+/ECDH=\w+ conn=S-[1-9]\d* db=db user=\S+ addr=127\.0\.0\.1:\d+`); !re.MatchString(tp.log.tail()) {
		t.Errorf("no log line matching %q in\n%s", re, tp.log.tail())
	}
}

// startTLSProxy serves Postgres's TLS for the fake at port: it answers an
// SSLRequest with 'S', completes the handshake with ca's server
// certificate and relays the rest. It returns its address, and stop,
// which closes it and its connections and waits for its goroutines.
func startTLSProxy(t *testing.T, ca testCA, port int) (addr string, stop func()) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(ca.cert, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	relay := func(c net.Conn) {
		var req [8]byte
		if _, err := io.ReadFull(c, req[:]); err != nil || string(req[:]) != string(wire.AppendSSLRequest(nil)) {
			return
		}
		if _, err := c.Write([]byte{'S'}); err != nil {
			return
		}
		tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
		if tc.Handshake() != nil {
			return
		}
		pg, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			return
		}
		track(pg)
		go func() { io.Copy(pg, tc); pg.Close() }()
		io.Copy(tc, pg)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			track(c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				relay(c)
			}()
		}
	}()
	return ln.Addr().String(), func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}
}

// connectAndQuery logs in to db at addr (user u) and runs q, returning
// the first error the pooler sent or the connection's.
func connectAndQuery(addr, db, q string) (net.Conn, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second)) // a failsafe, not a measurement
	br := newBackendReader(conn)
	untilReady := func() error {
		for {
			typ, body, err := br.next()
			switch {
			case err != nil:
				return err
			case typ == 'E':
				return fmt.Errorf("error %q", body)
			case typ == 'Z':
				return nil
			}
		}
	}
	if _, err := conn.Write(startupPacket(0, [][2]string{{"user", "u"}, {"database", db}})); err != nil {
		return conn, err
	}
	if err := untilReady(); err != nil {
		return conn, err
	}
	msg := append([]byte{'Q', 0, 0, 0, 0}, q+"\x00"...)
	binary.BigEndian.PutUint32(msg[1:], uint32(len(msg)-1))
	if _, err := conn.Write(msg); err != nil {
		return conn, err
	}
	return conn, untilReady()
}

// waitFor polls cond until it holds, failing the test after 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// client_tls13_ciphers naming no TLS 1.3 suite is refused as PgBouncer's
// libtls refuses it: the SET answers the NOTICE, "TLS setup failed: failed
// to set the TLSv1.3 cipher suites" is logged, and the TLS in force stays.
// A list with a known suite applies (crypto/tls still picks the suite).
func TestTLS13CiphersChecked(t *testing.T) {
	ca := newTestCA(t, "one")
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"db": ""}, "client_tls_sslmode = require\n"+
		"client_tls_key_file = "+ca.key+"\nclient_tls_cert_file = "+ca.cert+"\n")
	defer tp.shutdown(t, fake)
	before := tp.svc.gen.Load().sec
	con := tp.svc.Console()
	if err := con.Set("client_tls13_ciphers", "TLS_AES_256_GCM_SHA384"); err != nil {
		t.Fatalf("SET client_tls13_ciphers to a TLS 1.3 suite: %v", err)
	}
	applied := tp.svc.gen.Load().sec
	if applied.ClientTLS == before.ClientTLS {
		t.Error("a valid client_tls13_ciphers was not applied")
	}
	if err := con.Set("client_tls13_ciphers", "unknown"); !errors.As(err, new(*admin.Notice)) {
		t.Fatalf("SET client_tls13_ciphers = 'unknown': %v; want the NOTICE", err)
	}
	if !strings.Contains(tp.log.tail(), "ERROR TLS setup failed: failed to set the TLSv1.3 cipher suites") {
		t.Errorf("PgBouncer's line is not logged:\n%s", tp.log.tail())
	}
	if tp.svc.gen.Load().sec.ClientTLS != applied.ClientTLS {
		t.Error("the TLS in force changed after a client_tls13_ciphers that names no suite")
	}
	if err := clientHandshake(tp.addr, ca.pool); err != nil {
		t.Errorf("a client after the refused SET: %v", err)
	}
}

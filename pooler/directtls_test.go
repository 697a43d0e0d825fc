package pooler

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestDirectTLS pins direct TLS (sslnegotiation=direct): a TCP client that
// starts with a TLS ClientHello offering ALPN "postgresql" logs in over
// TLS with no SSLRequest; one offering no ALPN is closed after the
// handshake with PostgreSQL's log line; one offering only another
// protocol fails the handshake; an SSLRequest inside direct TLS is a
// repeated one; SSLRequest and plaintext clients go on as before.
func TestDirectTLS(t *testing.T) {
	ca := newTestCA(t, "pooler")
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"db": ""}, "client_tls_sslmode = prefer\n"+
		"client_tls_key_file = "+ca.key+"\nclient_tls_cert_file = "+ca.cert+"\n")
	defer tp.shutdown(t, fake)
	login := startupPacket(0, [][2]string{{"user", "u"}, {"database", "db"}})
	sslRequest := []byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f}

	dial := func(t *testing.T) net.Conn {
		t.Helper()
		conn, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		return conn
	}
	// transcript sends pkts on conn and lists the replies' types up to
	// ReadyForQuery or the end ("E:text" for an error).
	transcript := func(t *testing.T, conn net.Conn, pkts ...[]byte) string {
		t.Helper()
		for _, p := range pkts {
			if _, err := conn.Write(p); err != nil {
				t.Fatal(err)
			}
		}
		var out []string
		br := bufio.NewReader(conn)
		for {
			typ, body, err := readLoginMessage(br)
			if err != nil {
				out = append(out, "EOF")
				break
			}
			switch typ {
			case 'E':
				out = append(out, "E:"+string(body))
			case 'S', 'K':
				continue
			default:
				out = append(out, string(typ))
			}
			if typ == 'Z' || typ == 'E' {
				break
			}
		}
		return strings.Join(out, " ")
	}
	client := func(protos ...string) *tls.Config {
		return &tls.Config{RootCAs: ca.pool, ServerName: "127.0.0.1", NextProtos: protos}
	}

	t.Run("direct", func(t *testing.T) {
		tc := tls.Client(dial(t), client("postgresql"))
		defer tc.Close()
		if err := tc.Handshake(); err != nil {
			t.Fatalf("handshake: %v", err)
		}
		if p := tc.ConnectionState().NegotiatedProtocol; p != "postgresql" {
			t.Errorf("ALPN %q", p)
		}
		if got := transcript(t, tc, login); got != "R Z" {
			t.Errorf("direct TLS login: %q", got)
		}
	})
	// A client that keeps TLS sessions (Go's ClientSessionCache; libpq
	// keeps none) resumes its session on the next connection: no
	// certificate signature for the pooler to compute, which is most of
	// the cost of a login over TLS with an RSA certificate.
	t.Run("resumed", func(t *testing.T) {
		cfg := client("postgresql")
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
		for i, want := range []bool{false, true} {
			tc := tls.Client(dial(t), cfg)
			if got := transcript(t, tc, login); got != "R Z" {
				t.Errorf("login %d: %q", i+1, got)
			}
			if got := tc.ConnectionState().DidResume; got != want {
				t.Errorf("login %d: DidResume = %v, want %v", i+1, got, want)
			}
			tc.Close()
		}
	})
	t.Run("directWithoutALPN", func(t *testing.T) {
		tc := tls.Client(dial(t), client())
		defer tc.Close()
		if err := tc.Handshake(); err != nil {
			t.Fatalf("handshake: %v", err)
		}
		tc.Write(login)
		if _, err := tc.Read(make([]byte, 1)); err == nil {
			t.Error("a direct-TLS client without ALPN got an answer")
		}
		if !strings.Contains(tp.log.tail(), "received direct SSL connection request without ALPN protocol negotiation extension") {
			t.Errorf("no log line:\n%s", tp.log.tail())
		}
	})
	t.Run("directOtherALPN", func(t *testing.T) {
		tc := tls.Client(dial(t), client("http/1.1"))
		defer tc.Close()
		err := tc.Handshake()
		if err == nil || !strings.Contains(err.Error(), "no application protocol") {
			t.Errorf("handshake offering http/1.1 only: %v, want the no_application_protocol alert", err)
		}
	})
	t.Run("sslRequestInsideDirect", func(t *testing.T) {
		tc := tls.Client(dial(t), client("postgresql"))
		defer tc.Close()
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		got := transcript(t, tc, sslRequest)
		if !strings.Contains(got, "unsupported frontend protocol 1234.5679") {
			t.Errorf("SSLRequest inside direct TLS: %q", got)
		}
	})
	t.Run("sslRequest", func(t *testing.T) {
		conn := dial(t)
		defer conn.Close()
		conn.Write(sslRequest)
		var b [1]byte
		if _, err := io.ReadFull(conn, b[:]); err != nil || b[0] != 'S' {
			t.Fatalf("SSLRequest answered %q %v", b[:], err)
		}
		tc := tls.Client(conn, client("postgresql"))
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		if got := transcript(t, tc, login); got != "R Z" {
			t.Errorf("SSLRequest login: %q", got)
		}
	})
	t.Run("plain", func(t *testing.T) {
		conn := dial(t)
		defer conn.Close()
		if got := transcript(t, conn, login); got != "R Z" {
			t.Errorf("plaintext login: %q", got)
		}
	})
}

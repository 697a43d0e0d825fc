package pooler

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgturnstile/pgturnstile/wire"
)

// The startup packets are read through the client's buffer, so bytes a
// client sends after an SSLRequest, without waiting for the answer, are
// read with it. Before TLS they are refused as PostgreSQL refuses them
// (they did not come through TLS, and a man in the middle may have put
// them there); without TLS they are the next packet, and the login goes on.
func TestUnencryptedDataAfterSSLRequest(t *testing.T) {
	ca := newTestCA(t, "buffered")
	tlsOn := "client_tls_sslmode = allow\nclient_tls_key_file = " + ca.key + "\nclient_tls_cert_file = " + ca.cert + "\n"
	startup := wire.AppendStartup(nil, []wire.Param{{Name: "user", Value: "u"}, {Name: "database", Value: "db"}})
	both := append(wire.AppendSSLRequest(nil), startup...)

	t.Run("tls", func(t *testing.T) {
		fake := startFakePostgres(t)
		tp := startTestPooler(t, fake, map[string]string{"db": ""}, tlsOn)
		defer tp.shutdown(t, fake)
		conn := dialRaw(t, tp.addr)
		if _, err := conn.Write(both); err != nil {
			t.Fatal(err)
		}
		var first [1]byte
		if _, err := io.ReadFull(conn, first[:]); err != nil {
			t.Fatal(err)
		}
		if first[0] != 'E' {
			t.Fatalf("the pooler answered %q; want an ErrorResponse, not TLS", first[:])
		}
		rest, _ := io.ReadAll(conn) // the error, then EOF
		var e pgproto3.ErrorResponse
		if err := e.Decode(rest[4:]); err != nil {
			t.Fatalf("decoding the error: %v (%q)", err, rest)
		}
		if e.Code != "08P01" || e.Message != "received unencrypted data after SSL request" {
			t.Fatalf("error %s %q; want 08P01 \"received unencrypted data after SSL request\"", e.Code, e.Message)
		}
	})

	t.Run("plain", func(t *testing.T) {
		fake := startFakePostgres(t)
		tp := startTestPooler(t, fake, map[string]string{"db": ""}, "")
		defer tp.shutdown(t, fake)
		conn := dialRaw(t, tp.addr)
		defer conn.Close() // before the shutdown
		if _, err := conn.Write(both); err != nil {
			t.Fatal(err)
		}
		var first [1]byte
		if _, err := io.ReadFull(conn, first[:]); err != nil || first[0] != 'N' {
			t.Fatalf("answer to the SSLRequest: %q, %v; want N", first[:], err)
		}
		fe := pgproto3.NewFrontend(conn, conn)
		msg, err := fe.Receive()
		if _, ok := msg.(*pgproto3.AuthenticationOk); err != nil || !ok {
			t.Fatalf("after N, the buffered startup packet: %T %v; want AuthenticationOk", msg, err)
		}
		for {
			msg, err := fe.Receive()
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
				break
			}
		}
	})
}

func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	return conn
}

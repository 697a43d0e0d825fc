package tlsconn

import (
	"crypto/tls"
	"io"
	"net"
	"path/filepath"
	"testing"

	"github.com/pgturnstile/pgturnstile/internal/netpoll"
	"github.com/pgturnstile/pgturnstile/internal/testcert"
	"github.com/pgturnstile/pgturnstile/wire"
)

// TestTransportRawAndUnwrapped: crypto/tls reads a client's socket
// through raw system calls where the platform has them, the bytes arrive
// intact both ways, and the socket under the TLS layer is still found (the
// peer-credentials rule needs the *net.UnixConn).
func TestTransportRawAndUnwrapped(t *testing.T) {
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialed, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer dialed.Close()
	accepted, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer accepted.Close()

	tr := Transport(accepted, wire.SocketIO(accepted))
	if _, raw := tr.(*rawNetConn); raw != netpoll.RawIO {
		t.Fatalf("tlsTransport gave %T; raw system calls here: %v", tr, netpoll.RawIO)
	}
	dir := t.TempDir()
	ca, err := testcert.NewCA(dir, "transport test CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.Issue(dir, "server", testcert.Localhost, nil)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	srv := tls.Server(tr, &tls.Config{Certificates: []tls.Certificate{pair}})
	cli := tls.Client(dialed, &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"})
	done := make(chan error, 1)
	go func() {
		if err := srv.Handshake(); err != nil {
			done <- err
			return
		}
		buf := make([]byte, 5)
		if _, err := io.ReadFull(srv, buf); err != nil {
			done <- err
			return
		}
		_, err := srv.Write(append(buf, '!'))
		done <- err
	}()
	if _, err := cli.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 6)
	if _, err := io.ReadFull(cli, got); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if string(got) != "hello!" {
		t.Fatalf("echo over TLS: %q, want %q", got, "hello!")
	}
	if uc, ok := NetConn(srv).(*net.UnixConn); !ok || uc != accepted {
		t.Fatalf("NetConn(TLS conn) = %T, want the accepted *net.UnixConn", NetConn(srv))
	}
	if NetConn(accepted) != accepted {
		t.Fatal("NetConn(plain conn) is not the conn itself")
	}
}

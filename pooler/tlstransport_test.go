package pooler

import (
	"crypto/tls"
	"io"
	"net"
	"path/filepath"
	"testing"

	"github.com/pgturnstile/pgturnstile/internal/netpoll"
	"github.com/pgturnstile/pgturnstile/wire"
)

// TestTLSTransportRawAndUnwrapped: crypto/tls reads a client's socket
// through raw system calls where the platform has them, the bytes arrive
// intact both ways, and the socket under the TLS layer is still found (the
// peer-credentials rule needs the *net.UnixConn).
func TestTLSTransportRawAndUnwrapped(t *testing.T) {
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

	tr := tlsTransport(accepted, wire.SocketIO(accepted))
	if _, raw := tr.(*rawNetConn); raw != netpoll.RawIO {
		t.Fatalf("tlsTransport gave %T; raw system calls here: %v", tr, netpoll.RawIO)
	}
	ca := newTestCA(t, "transport")
	pair, err := tls.LoadX509KeyPair(ca.cert, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	srv := tls.Server(tr, &tls.Config{Certificates: []tls.Certificate{pair}})
	cli := tls.Client(dialed, &tls.Config{RootCAs: ca.pool, ServerName: "127.0.0.1"})
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
	if uc, ok := netConnOf(srv).(*net.UnixConn); !ok || uc != accepted {
		t.Fatalf("netConnOf(TLS conn) = %T, want the accepted *net.UnixConn", netConnOf(srv))
	}
	if netConnOf(accepted) != accepted {
		t.Fatal("netConnOf(plain conn) is not the conn itself")
	}
}

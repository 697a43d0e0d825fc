//go:build linux

package integration

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// faultProxy is a TCP proxy between the pooler and Postgres that makes the
// server side misbehave on purpose. It knows one fault so far: holding the
// server's first authentication-phase reply (AuthenticationSASL, MD5, Ok or
// an ErrorResponse: the first message after the StartupMessage) for
// loginDelay, so that every server login takes that much longer, as with a
// Postgres that is slow to fork a backend. Everything else is relayed as it
// comes, byte for byte.
//
// It reads the start of each connection itself, to find that reply: the
// pooler's first packet, the one-byte answer to an SSLRequest or
// GSSENCRequest (then the StartupMessage), and the server's first message.
// If the answer is 'S' or 'G' the rest is encrypted: the proxy holds the
// server's next bytes (the TLS ServerHello) instead. A CancelRequest is
// relayed untouched.
type faultProxy struct {
	t      testing.TB
	ln     net.Listener
	Port   int
	target string

	loginDelay atomic.Int64 // nanoseconds
	delayed    atomic.Int64 // logins whose reply was held

	mu       sync.Mutex
	closed   bool
	released []time.Time // when each held reply was let through, in order
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// startFaultProxy listens on 127.0.0.1:0 and relays every connection to
// target (host:port); it is closed, connections and all, in t.Cleanup.
func startFaultProxy(t testing.TB, target string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fp := &faultProxy{t: t, ln: ln, Port: ln.Addr().(*net.TCPAddr).Port, target: target, conns: map[net.Conn]struct{}{}}
	fp.wg.Add(1)
	go fp.accept()
	t.Cleanup(fp.close)
	return fp
}

// pgProxyTarget is the test Postgres's TCP address.
func pgProxyTarget(t testing.TB) string {
	return "127.0.0.1:" + strconv.Itoa(needPG(t).port)
}

// SetLoginDelay sets how long each new connection's first
// authentication-phase reply is held (0: not at all).
func (fp *faultProxy) SetLoginDelay(d time.Duration) { fp.loginDelay.Store(int64(d)) }

// Delayed is how many logins had their reply held so far.
func (fp *faultProxy) Delayed() int64 { return fp.delayed.Load() }

// Ini returns ini with the pooler's [databases] pointed at the proxy
// instead of Postgres (@PGPORT@, which startPooler would fill in).
func (fp *faultProxy) Ini(ini string) string {
	return strings.ReplaceAll(ini, "@PGPORT@", strconv.Itoa(fp.Port))
}

func (fp *faultProxy) track(c net.Conn) bool {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.closed {
		return false
	}
	fp.conns[c] = struct{}{}
	return true
}

func (fp *faultProxy) untrack(c net.Conn) {
	fp.mu.Lock()
	delete(fp.conns, c)
	fp.mu.Unlock()
	c.Close()
}

func (fp *faultProxy) close() {
	fp.mu.Lock()
	fp.closed = true
	fp.ln.Close()
	for c := range fp.conns {
		c.Close()
	}
	fp.mu.Unlock()
	fp.wg.Wait()
}

func (fp *faultProxy) accept() {
	defer fp.wg.Done()
	for {
		c, err := fp.ln.Accept()
		if err != nil {
			return
		}
		if !fp.track(c) {
			c.Close()
			return
		}
		fp.wg.Add(1)
		go func() {
			defer fp.wg.Done()
			defer fp.untrack(c)
			fp.relay(c)
		}()
	}
}

// Protocol codes of the special startup packets.
const (
	cancelRequestCode   = 80877102
	sslRequestCode      = 80877103
	gssencRequestCode   = 80877104
	maxStartupPacketLen = 10000 // Postgres's own limit
)

// relay connects to the target, injects the fault into the login, and
// then copies both ways until either side closes.
func (fp *faultProxy) relay(fromPooler net.Conn) {
	toServer, err := net.DialTimeout("tcp", fp.target, 5*time.Second)
	if err != nil {
		return
	}
	if !fp.track(toServer) {
		toServer.Close()
		return
	}
	defer fp.untrack(toServer)
	// The login prefix must arrive soon; after it, no deadline.
	deadline := time.Now().Add(30 * time.Second)
	_ = fromPooler.SetDeadline(deadline)
	_ = toServer.SetDeadline(deadline)
	holdNextChunk, err := fp.login(fromPooler, toServer)
	if err != nil {
		return
	}
	_ = fromPooler.SetDeadline(time.Time{})
	_ = toServer.SetDeadline(time.Time{})
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(toServer, fromPooler)
		done <- struct{}{}
	}()
	go func() {
		if holdNextChunk {
			buf := make([]byte, 32<<10)
			n, err := toServer.Read(buf)
			if n > 0 {
				fp.hold()
				_, err = fromPooler.Write(buf[:n])
			}
			if err != nil {
				done <- struct{}{}
				return
			}
		}
		_, _ = io.Copy(fromPooler, toServer)
		done <- struct{}{}
	}()
	<-done // either side ended: end both, and wait for the other copy
	fromPooler.Close()
	toServer.Close()
	<-done
}

// hold sleeps for the login delay, counts it and notes when it ended.
func (fp *faultProxy) hold() {
	if d := time.Duration(fp.loginDelay.Load()); d > 0 {
		fp.delayed.Add(1)
		time.Sleep(d)
		fp.mu.Lock()
		fp.released = append(fp.released, time.Now())
		fp.mu.Unlock()
	}
}

// ReleasedAt is when the n-th held reply (counting from 1, over the
// proxy's life) was let through; ok is false if it has not been yet.
func (fp *faultProxy) ReleasedAt(n int64) (at time.Time, ok bool) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if n < 1 || n > int64(len(fp.released)) {
		return time.Time{}, false
	}
	return fp.released[n-1], true
}

// login relays the start of a connection up to and including the server's
// first authentication-phase reply, held for the delay. holdNextChunk says
// the connection went encrypted before that reply, so the relay must hold
// the server's next bytes instead.
func (fp *faultProxy) login(fromPooler, toServer net.Conn) (holdNextChunk bool, err error) {
	for {
		pkt, code, err := readStartupPacket(fromPooler)
		if err != nil {
			return false, err
		}
		if _, err := toServer.Write(pkt); err != nil {
			return false, err
		}
		switch code {
		case cancelRequestCode:
			return false, nil // nothing to delay: relay as is
		case sslRequestCode, gssencRequestCode:
			var answer [1]byte
			if _, err := io.ReadFull(toServer, answer[:]); err != nil {
				return false, err
			}
			if _, err := fromPooler.Write(answer[:]); err != nil {
				return false, err
			}
			if answer[0] != 'N' {
				return true, nil // TLS or GSS from here on
			}
			continue // the StartupMessage follows
		}
		// The StartupMessage went to the server; its first reply is the
		// authentication request (or an error).
		msg, err := readMessage(toServer)
		if err != nil {
			return false, err
		}
		fp.hold()
		_, err = fromPooler.Write(msg)
		return false, err
	}
}

// readStartupPacket reads a length-prefixed packet without a type byte and
// returns it whole with its protocol code.
func readStartupPacket(r io.Reader) ([]byte, uint32, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, 0, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < 8 || n > maxStartupPacketLen {
		return nil, 0, fmt.Errorf("startup packet length %d", n)
	}
	pkt := make([]byte, n)
	copy(pkt, hdr[:])
	if _, err := io.ReadFull(r, pkt[8:]); err != nil {
		return nil, 0, err
	}
	return pkt, binary.BigEndian.Uint32(hdr[4:]), nil
}

// readMessage reads one typed protocol message and returns it whole.
func readMessage(r io.Reader) ([]byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n < 4 || n > 1<<20 {
		return nil, errors.New("implausible message length from the server")
	}
	msg := make([]byte, 1+n)
	copy(msg, hdr[:])
	if _, err := io.ReadFull(r, msg[5:]); err != nil {
		return nil, err
	}
	return msg, nil
}

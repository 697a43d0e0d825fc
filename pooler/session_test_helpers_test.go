package pooler

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/config"
)

// Helpers shared by FuzzSession and TestRelayProperty: a Service in front
// of a fakePostgres, a log that notices panics, a client-side reader that
// checks every byte the pooler sends is a well-framed backend message, and
// goroutine accounting.

// testPoolerSettings are the [pgbouncer] settings the pooler's in-process
// tests share (after their own listen_addr): no Unix socket, any user, no
// TLS, no server check, no connect or close pacing, disconnections logged.
const testPoolerSettings = `unix_socket_dir =
auth_type = any
server_tls_sslmode = disable
server_check_query =
server_connect_rate = 0
server_close_rate = 0
server_max_parallel_connects = 0
log_connections = 0
log_disconnections = 1
`

// testPooler is a Service listening on 127.0.0.1:0 in front of a fake.
type testPooler struct {
	svc    *Service
	log    *captureLog
	addr   string
	served chan error
	stop   context.CancelFunc
}

// startTestPooler parses an ini whose [databases] section lists dbs (name
// = extra connection settings) pointing at fake, with settings added to
// [pgbouncer], and starts serving.
func startTestPooler(tb testing.TB, fake *fakePostgres, dbs map[string]string, settings string, opts ...Option) *testPooler {
	tb.Helper()
	var ini strings.Builder
	ini.WriteString("[databases]\n")
	for name, extra := range dbs {
		fmt.Fprintf(&ini, "%s = host=127.0.0.1 port=%d dbname=fake %s\n", name, fake.port(), extra)
	}
	ini.WriteString("[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = 0\n" + testPoolerSettings)
	ini.WriteString(settings)
	cfg, err := config.Parse("test.ini", []byte(ini.String()))
	if err != nil {
		tb.Fatalf("config: %v\n%s", err, ini.String())
	}
	lg := &captureLog{}
	svc, err := New(cfg, slog.New(&captureHandler{log: lg}), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	if err := svc.Listen(); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tp := &testPooler{svc: svc, log: lg, addr: svc.Addrs()[0].String(), served: make(chan error, 1), stop: cancel}
	go func() { tp.served <- svc.Serve(ctx) }()
	return tp
}

// shutdown stops the service and then the fake, and fails if any pooler
// goroutine is still running 3 s later. Closing the fake ends the
// drains of servers whose client left, which are bounded by drainTimeout
// on their own.
func (tp *testPooler) shutdown(tb testing.TB, fake *fakePostgres) {
	tb.Helper()
	tp.svc.Shutdown(context.Background(), admin.ShutdownImmediate)
	select {
	case <-tp.served:
	case <-time.After(3 * time.Second):
		tb.Errorf("Serve did not return within 3 s of Shutdown")
	}
	tp.stop()
	fake.Close()
	deadline := time.Now().Add(3 * time.Second)
	for {
		left := poolerGoroutines(func(string) bool { return true })
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			tb.Errorf("pooler goroutines still running 3 s after shutdown:\n%s", strings.Join(left, "\n\n"))
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if p := tp.log.takePanics(); len(p) > 0 {
		tb.Errorf("the pooler logged panics:\n%s", strings.Join(p, "\n"))
	}
}

// clientByKey finds the pooler's client with the BackendKeyData key it
// sent (nil once the client is gone).
func (tp *testPooler) clientByKey(key []byte) *client {
	var k [8]byte
	copy(k[:], key)
	tp.svc.cancelMu.Lock()
	defer tp.svc.cancelMu.Unlock()
	return tp.svc.cancels[k]
}

// linked reports whether a client holds a server.
func (c *client) linkedForTest() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.link != nil && c.mu.link.mu.srv != nil
}

// stateForTest is the client's state, read under its lock.
func (c *client) stateForTest() clientState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.state
}

// captureLog keeps what the pooler logged: every line mentioning a panic,
// and the last lines for context.
type captureLog struct {
	mu     sync.Mutex
	panics []string
	recent []string
}

func (l *captureLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if strings.Contains(line, "panic") {
		l.panics = append(l.panics, line)
	}
	if len(l.recent) >= 64 {
		l.recent = append(l.recent[:0], l.recent[32:]...)
	}
	l.recent = append(l.recent, line)
}

func (l *captureLog) takePanics() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.panics
	l.panics = nil
	return p
}

func (l *captureLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.recent, "\n")
}

type captureHandler struct {
	log   *captureLog
	attrs string
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	var sb strings.Builder
	sb.WriteString(r.Level.String())
	sb.WriteString(" ")
	sb.WriteString(r.Message)
	sb.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		sb.WriteString(" " + a.Key + "=" + a.Value.String())
		return true
	})
	h.log.add(sb.String())
	return nil
}

func (h *captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	s := h.attrs
	for _, a := range as {
		s += " " + a.Key + "=" + a.Value.String()
	}
	return &captureHandler{log: h.log, attrs: s}
}

func (h *captureHandler) WithGroup(string) slog.Handler { return h }

// errBadFrame marks bytes from the pooler that are not a well-formed
// backend message: always a test failure.
var errBadFrame = errors.New("not a well-formed backend message")

// backendReader reads the pooler's replies to a client and checks each is
// a well-framed, decodable backend message.
type backendReader struct {
	r *bufio.Reader
}

func newBackendReader(c net.Conn) *backendReader {
	return &backendReader{r: bufio.NewReaderSize(c, 64<<10)}
}

// maxBackendMessage bounds what a test expects from the fake through the
// pooler (the fake's replies are small).
const maxBackendMessage = 1 << 20

func (br *backendReader) next() (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(br.r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[1:]))
	if n < 4 || n-4 > maxBackendMessage {
		return hdr[0], nil, fmt.Errorf("%w: type %q, length %d", errBadFrame, hdr[0], n)
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(br.r, body); err != nil {
		return 0, nil, err
	}
	if err := checkBackendMessage(hdr[0], body); err != nil {
		return hdr[0], body, err
	}
	return hdr[0], body, nil
}

// checkBackendMessage decodes a backend message body with pgproto3 and
// applies the protocol's own constraints pgproto3 leaves out.
func checkBackendMessage(typ byte, body []byte) error {
	switch typ {
	case 'R':
		return checkAuthentication(body)
	case '2', '3', '1', 'n', 'I', 's', 'c':
		if len(body) != 0 {
			return fmt.Errorf("%w: %q with a %d-byte body", errBadFrame, typ, len(body))
		}
		return nil
	case 'd':
		return nil
	case 'Z':
		if len(body) != 1 || (body[0] != 'I' && body[0] != 'T' && body[0] != 'E') {
			return fmt.Errorf("%w: ReadyForQuery %q", errBadFrame, body)
		}
		return nil
	}
	newMessage, ok := backendDecoders[typ]
	if !ok {
		return fmt.Errorf("%w: unknown type %q (%d-byte body)", errBadFrame, typ, len(body))
	}
	return checkDecode(typ, body, newMessage())
}

// backendDecoders are the backend messages checked by decoding them.
var backendDecoders = map[byte]func() pgproto3.BackendMessage{
	'K': func() pgproto3.BackendMessage { return &pgproto3.BackendKeyData{} },
	'C': func() pgproto3.BackendMessage { return &pgproto3.CommandComplete{} },
	'G': func() pgproto3.BackendMessage { return &pgproto3.CopyInResponse{} },
	'H': func() pgproto3.BackendMessage { return &pgproto3.CopyOutResponse{} },
	'W': func() pgproto3.BackendMessage { return &pgproto3.CopyBothResponse{} },
	'D': func() pgproto3.BackendMessage { return &pgproto3.DataRow{} },
	'E': func() pgproto3.BackendMessage { return &pgproto3.ErrorResponse{} },
	'N': func() pgproto3.BackendMessage { return &pgproto3.NoticeResponse{} },
	'V': func() pgproto3.BackendMessage { return &pgproto3.FunctionCallResponse{} },
	'v': func() pgproto3.BackendMessage { return &pgproto3.NegotiateProtocolVersion{} },
	'A': func() pgproto3.BackendMessage { return &pgproto3.NotificationResponse{} },
	't': func() pgproto3.BackendMessage { return &pgproto3.ParameterDescription{} },
	'S': func() pgproto3.BackendMessage { return &pgproto3.ParameterStatus{} },
	'T': func() pgproto3.BackendMessage { return &pgproto3.RowDescription{} },
}

// checkAuthentication accepts only AuthenticationOk: the tests' pooler
// asks its clients for no password.
func checkAuthentication(body []byte) error {
	if len(body) < 4 {
		return fmt.Errorf("%w: short Authentication", errBadFrame)
	}
	if code := binary.BigEndian.Uint32(body); code != 0 {
		return fmt.Errorf("%w: unexpected Authentication request %d", errBadFrame, code)
	}
	return checkDecode('R', body, &pgproto3.AuthenticationOk{})
}

// checkDecode decodes body into m; ErrorResponse and NoticeResponse must
// also end with the NUL that ends their field list.
func checkDecode(typ byte, body []byte, m pgproto3.BackendMessage) error {
	if err := m.Decode(body); err != nil {
		return fmt.Errorf("%w: %q: %v", errBadFrame, typ, err)
	}
	if typ == 'E' || typ == 'N' {
		// Fields end with a lone NUL; pgproto3 stops at the first one.
		if len(body) == 0 || body[len(body)-1] != 0 {
			return fmt.Errorf("%w: %q fields not terminated", errBadFrame, typ)
		}
	}
	return nil
}

// isClosed reports a read or write error that means the pooler closed the
// connection (as opposed to a deadline).
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}

// startupPacket builds a StartupMessage for protocol 3.minor.
func startupPacket(minor uint16, params [][2]string) []byte {
	b := []byte{0, 0, 0, 0, 0, 3, byte(minor >> 8), byte(minor)}
	for _, p := range params {
		b = append(b, p[0]...)
		b = append(b, 0)
		b = append(b, p[1]...)
		b = append(b, 0)
	}
	b = append(b, 0)
	binary.BigEndian.PutUint32(b, uint32(len(b)))
	return b
}

var goroutineHeader = regexp.MustCompile(`^goroutine (\d+) `)

// poolerGoroutines returns the stacks of goroutines running a function of
// this package (frames only, not "created by") for which keep(frame line)
// is true on some frame.
func poolerGoroutines(keep func(fn string) bool) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		match := false
		for _, line := range strings.Split(g, "\n") {
			if strings.HasPrefix(line, "created by") || !strings.HasPrefix(line, "github.com/pgturnstile/pgturnstile/pooler.") {
				continue
			}
			fn := strings.TrimPrefix(line, "github.com/pgturnstile/pgturnstile/pooler.")
			if strings.HasPrefix(fn, "Fuzz") || strings.HasPrefix(fn, "Test") || strings.Contains(fn, "ForTest") || strings.HasPrefix(fn, "(*session") || strings.HasPrefix(fn, "(*fake") || strings.HasPrefix(fn, "(*testPooler") || strings.HasPrefix(fn, "(*relayProp") || strings.HasPrefix(fn, "poolerGoroutines") || strings.HasPrefix(fn, "startFake") || strings.HasPrefix(fn, "startTestPooler") {
				match = false
				break
			}
			if keep(fn) {
				match = true
			}
		}
		if match {
			out = append(out, g)
		}
	}
	return out
}

// goroutineID is the number in a stack's first line.
func goroutineID(stack string) int {
	m := goroutineHeader.FindStringSubmatch(stack)
	if m == nil {
		return 0
	}
	id, _ := strconv.Atoi(m[1])
	return id
}

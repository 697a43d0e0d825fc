//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgturnstile/pgturnstile/bench/internal/benchenv"
)

// hostileCase is one huge message: its type byte, the body bytes before and
// after the size bytes of 'x' that make it huge, and the messages sent after
// it when it went out whole.
type hostileCase struct {
	key   string
	title string // for the report
	user  string
	db    string
	typ   byte
	head  string
	tail  string
	after []pgproto3.FrontendMessage
}

func cases() []hostileCase {
	parseTail := "')\x00\x00\x00" // end of the query text, no parameter types
	return []hostileCase{
		{key: "parse-named", title: "Parse `huge` `SELECT length('x…')`, Sync",
			user: benchUser, db: benchDB, typ: 'P', head: "huge\x00SELECT length('", tail: parseTail,
			after: []pgproto3.FrontendMessage{&pgproto3.Sync{}}},
		{key: "parse-unnamed", title: "Parse unnamed `SELECT length('x…')`, Bind, Execute, Sync",
			user: benchUser, db: benchDB, typ: 'P', head: "\x00SELECT length('", tail: parseTail,
			after: []pgproto3.FrontendMessage{&pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{}}},
		{key: "describe", title: "Describe 'S' with a huge name, Sync",
			user: benchUser, db: benchDB, typ: 'D', head: "S", tail: "\x00",
			after: []pgproto3.FrontendMessage{&pgproto3.Sync{}}},
		{key: "close", title: "Close 'S' with a huge name, Sync",
			user: benchUser, db: benchDB, typ: 'C', head: "S", tail: "\x00",
			after: []pgproto3.FrontendMessage{&pgproto3.Sync{}}},
		{key: "console-admin", title: "console Query `SHOW x…` as admin_users user",
			user: adminUser, db: consoleDB, typ: 'Q', head: "SHOW ", tail: "\x00"},
		{key: "console-stats", title: "console Query `SHOW x…` as stats_users user",
			user: statsUser, db: consoleDB, typ: 'Q', head: "SHOW ", tail: "\x00"},
	}
}

// msgLen is the huge message's length field (it counts itself, not the type).
func (c hostileCase) msgLen(size int) int64 {
	return 4 + int64(len(c.head)) + int64(size) + int64(len(c.tail))
}

// stream writes the case's huge message to w: the header and head, then
// size bytes of 'x' in chunks of len(chunk) (all 'x'), then the tail and the
// after messages. It stops at the first error and returns how many bytes of
// the huge message (header included) w accepted.
func (c hostileCase) stream(w io.Writer, size int, chunk []byte) (int64, error) {
	var hdr [5]byte
	hdr[0] = c.typ
	binary.BigEndian.PutUint32(hdr[1:], uint32(c.msgLen(size)))
	var written int64
	put := func(b []byte) error {
		n, err := w.Write(b)
		written += int64(n)
		return err
	}
	if err := put(append(hdr[:], c.head...)); err != nil {
		return written, err
	}
	for left := size; left > 0; {
		n := min(left, len(chunk))
		if err := put(chunk[:n]); err != nil {
			return written, err
		}
		left -= n
	}
	if err := put([]byte(c.tail)); err != nil {
		return written, err
	}
	var after []byte
	for _, m := range c.after {
		var err error
		if after, err = m.Encode(after); err != nil {
			return written, err
		}
	}
	if len(after) > 0 {
		if _, err := w.Write(after); err != nil {
			return written, err
		}
	}
	return written, nil
}

// deadlineWriter gives each Write noProgress to complete, so a pooler that
// stops reading without closing shows as a stall rather than a hang.
type deadlineWriter struct {
	c          net.Conn
	noProgress time.Duration
}

func (d deadlineWriter) Write(b []byte) (int, error) {
	d.c.SetWriteDeadline(time.Now().Add(d.noProgress))
	return d.c.Write(b)
}

// result is one pooler's figures for one case.
type result struct {
	caseKey, pooler string
	msgLen          int64
	baselineKB      int64
	peakKB          int64 // highest VmRSS sampled, from the first byte to the "after" reading
	afterKB         int64 // VmRSS 1 s after the client closed its socket
	samples         int
	written         int64  // bytes of the huge message our kernel accepted
	writeErr        string // why writing stopped early ("" if it all went)
	replies         []string
	ending          string // how the connection ended
	elapsed         time.Duration
	probe           probeStats
	poolerDied      string
	logTail         []string
	err             string // the case could not run
}

// runCase drives one case against one fresh pooler.
func runCase(p *proc, c hostileCase, o options) result {
	r := result{caseKey: c.key, pooler: p.kind, msgLen: c.msgLen(o.size)}
	logStart := fileSize(p.LogPath)

	pr := startProbe(p.Port)
	defer pr.stop()
	if err := pr.waitFirst(10 * time.Second); err != nil {
		r.err = "probe client: " + err.Error()
		return r
	}

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	pc, err := pgconn.Connect(ctx, connString(p.Port, c.user, c.db))
	cancel()
	if err != nil {
		r.err = "hostile client login: " + err.Error()
		return r
	}
	hc, err := pc.Hijack()
	if err != nil {
		r.err = "hijack: " + err.Error()
		return r
	}
	conn := hc.Conn
	conn.SetDeadline(time.Time{})

	// Baseline: the median of 5 readings 20 ms apart, after logins settled.
	time.Sleep(300 * time.Millisecond)
	var base []int64
	for range 5 {
		if kb, err := benchenv.StatusKB(p.Pid(), "VmRSS"); err == nil {
			base = append(base, kb)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(base) == 0 {
		r.err = "cannot read the pooler's VmRSS"
		conn.Close()
		return r
	}
	r.baselineKB = median(base)

	smp := startSampler(p.Pid(), 10*time.Millisecond)
	rd := startReader(hc.Frontend)
	start := time.Now()

	chunk := bytes.Repeat([]byte{'x'}, o.chunk)
	var werr error
	r.written, werr = c.stream(deadlineWriter{conn, 10 * time.Second}, o.size, chunk)
	if werr != nil {
		r.writeErr = describeErr(werr)
	}

	// Wait for the reply to end (ReadyForQuery) or the connection to close.
	select {
	case <-rd.rfq:
	case <-rd.done:
	case <-time.After(o.replyTimeout):
		r.ending = fmt.Sprintf("no ReadyForQuery within %s", o.replyTimeout)
	}
	r.elapsed = time.Since(start)
	select {
	case <-rd.done:
		// The pooler ended it, before or instead of ReadyForQuery.
		if r.ending == "" {
			r.ending = rd.endText()
		}
	default:
		if r.ending == "" {
			r.ending = "open (client sent Terminate)"
		}
		conn.SetWriteDeadline(time.Now().Add(time.Second))
		conn.Write([]byte{'X', 0, 0, 0, 4})
	}
	conn.Close()
	<-rd.done
	r.replies = rd.texts()

	time.Sleep(o.settle)
	r.afterKB, _ = benchenv.StatusKB(p.Pid(), "VmRSS")
	r.peakKB, r.samples = smp.stop()
	if r.afterKB > r.peakKB {
		r.peakKB = r.afterKB
	}
	r.probe = pr.stop()
	if !p.Alive() {
		r.poolerDied = fmt.Sprintf("pooler exited: %v", p.Err())
	}
	r.logTail = newLogLines(p.LogPath, logStart, 4)
	return r
}

// describeErr names the usual socket errors the way a reader expects them.
func describeErr(err error) string {
	switch {
	case errors.Is(err, syscall.EPIPE):
		return "EPIPE"
	case errors.Is(err, syscall.ECONNRESET):
		return "ECONNRESET"
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "stalled: no progress for 10 s"
	case errors.Is(err, io.EOF):
		return "EOF"
	}
	return err.Error()
}

func median(v []int64) int64 {
	s := append([]int64(nil), v...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

// ---------------------------------------------------------------------------
// RSS sampler

type sampler struct {
	quit chan struct{}
	done chan struct{}
	peak int64
	n    int
}

func startSampler(pid int, every time.Duration) *sampler {
	s := &sampler{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if kb, err := benchenv.StatusKB(pid, "VmRSS"); err == nil {
				s.n++
				s.peak = max(s.peak, kb)
			}
			select {
			case <-s.quit:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) stop() (peakKB int64, n int) {
	close(s.quit)
	<-s.done
	return s.peak, s.n
}

// ---------------------------------------------------------------------------
// What the hostile client reads back

type reader struct {
	mu      sync.Mutex
	replies []string
	end     error
	rfq     chan struct{} // closed at the first ReadyForQuery
	done    chan struct{} // closed when a read fails (the connection ended)
}

func startReader(fe *pgproto3.Frontend) *reader {
	rd := &reader{rfq: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(rd.done)
		sawRFQ := false
		for {
			msg, err := fe.Receive()
			if err != nil {
				rd.mu.Lock()
				rd.end = err
				rd.mu.Unlock()
				return
			}
			text := replyText(msg)
			if text == "" {
				continue
			}
			rd.mu.Lock()
			rd.replies = append(rd.replies, text)
			rd.mu.Unlock()
			if _, ok := msg.(*pgproto3.ReadyForQuery); ok && !sawRFQ {
				sawRFQ = true
				close(rd.rfq)
			}
		}
	}()
	return rd
}

func (rd *reader) texts() []string {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return append([]string(nil), rd.replies...)
}

// endText says how the connection ended from the client's side.
func (rd *reader) endText() string {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	switch {
	case rd.end == nil:
		return "open"
	case errors.Is(rd.end, io.EOF), errors.Is(rd.end, io.ErrUnexpectedEOF):
		return "closed by the pooler"
	case errors.Is(rd.end, syscall.ECONNRESET):
		return "reset by the pooler (ECONNRESET)"
	}
	return "read error: " + rd.end.Error()
}

// replyText is a short line for one backend message ("" to leave it out).
// Messages are flyweights, so everything is copied into the string.
func replyText(msg pgproto3.BackendMessage) string {
	switch m := msg.(type) {
	case *pgproto3.ErrorResponse:
		return fmt.Sprintf("%s %s %s", m.Severity, m.Code, clip(m.Message, 120))
	case *pgproto3.NoticeResponse:
		return fmt.Sprintf("NOTICE %s %s", m.Code, clip(m.Message, 80))
	case *pgproto3.DataRow:
		vals := make([]string, len(m.Values))
		for i, v := range m.Values {
			vals[i] = clip(string(v), 40)
		}
		return "row (" + strings.Join(vals, ", ") + ")"
	case *pgproto3.CommandComplete:
		return "CommandComplete " + string(m.CommandTag)
	case *pgproto3.ReadyForQuery:
		return "ReadyForQuery"
	case *pgproto3.ParseComplete:
		return "ParseComplete"
	case *pgproto3.BindComplete:
		return "BindComplete"
	case *pgproto3.CloseComplete:
		return "CloseComplete"
	case *pgproto3.NoData:
		return "NoData"
	case *pgproto3.ParameterDescription:
		return "ParameterDescription"
	case *pgproto3.RowDescription:
		return "RowDescription"
	case *pgproto3.ParameterStatus:
		return ""
	}
	return fmt.Sprintf("%T", msg)
}

// clip shortens s for the report, saying how long it was.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:n], len(s))
}

// ---------------------------------------------------------------------------
// The concurrent normal client

type probeStats struct {
	ok, failed int
	reconnects int
	maxLatency time.Duration
	firstErr   string
}

type probe struct {
	quit  chan struct{}
	done  chan struct{}
	first chan error // the first query's outcome
	st    probeStats
	once  sync.Once
}

// startProbe runs SELECT 1 through the pooler every 5 ms (or at once, when
// the last one took longer) on one connection, opened again after a failure
// that closed it.
func startProbe(port int) *probe {
	pr := &probe{quit: make(chan struct{}), done: make(chan struct{}), first: make(chan error, 1)}
	go func() {
		defer close(pr.done)
		var c *pgconn.PgConn
		defer func() {
			if c != nil {
				c.Close(context.Background())
			}
		}()
		next := time.Now()
		firstDone := false
		for {
			select {
			case <-pr.quit:
				return
			case <-time.After(time.Until(next)):
			}
			t0 := time.Now()
			next = t0.Add(5 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			var err error
			if c == nil || c.IsClosed() {
				if c != nil {
					pr.st.reconnects++
				}
				c, err = pgconn.Connect(ctx, connString(port, benchUser, benchDB))
				if err != nil {
					c = nil
				}
			}
			if err == nil {
				_, err = c.Exec(ctx, "SELECT 1").ReadAll()
			}
			cancel()
			lat := time.Since(t0)
			if !firstDone {
				firstDone = true
				pr.first <- err
				continue // the login is not part of the measurement
			}
			pr.st.maxLatency = max(pr.st.maxLatency, lat)
			if err != nil {
				pr.st.failed++
				if pr.st.firstErr == "" {
					pr.st.firstErr = clip(err.Error(), 120)
				}
				continue
			}
			pr.st.ok++
		}
	}()
	return pr
}

func (pr *probe) waitFirst(d time.Duration) error {
	select {
	case err := <-pr.first:
		return err
	case <-time.After(d):
		return fmt.Errorf("no reply within %s", d)
	}
}

func (pr *probe) stop() probeStats {
	pr.once.Do(func() { close(pr.quit) })
	<-pr.done
	return pr.st
}

// ---------------------------------------------------------------------------
// Pooler log lines written during a case

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// routineLogLine: logins, new server connections and ordinary logouts, which
// every case has and which say nothing about the huge message.
func routineLogLine(l string) bool {
	for _, s := range []string{"login attempt", "new connection to server", "closing because: client close request"} {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// newLogLines returns up to n lines written to path after offset from, the
// last ones but routine ones, each clipped.
func newLogLines(path string, from int64, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !routineLogLine(l) {
			lines = append(lines, clip(l, 300))
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

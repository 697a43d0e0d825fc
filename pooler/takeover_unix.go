//go:build !windows

package pooler

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/internal/fdcheck"
	"github.com/pgturnstile/pgturnstile/internal/netpoll"
	"github.com/pgturnstile/pgturnstile/wire"
)

// fdSender passes descriptors to the console's client over its Unix
// socket: msg goes out with fd attached to its first byte.
func (c *client) fdSender() admin.FDSender {
	uc, ok := c.conn.(*net.UnixConn)
	if !ok {
		return nil
	}
	return func(msg []byte, fd int) error {
		if err := c.w.Flush(); err != nil {
			return err
		}
		n, _, err := uc.WriteMsgUnix(msg, syscall.UnixRights(fd), nil)
		if err != nil {
			return err
		}
		if n < len(msg) {
			// A stream socket may take part of it: the rest follows
			// as plain bytes, the descriptor went with the first.
			_, err = uc.Write(msg[n:])
		}
		return err
	}
}

// dupFD duplicates a descriptor (close-on-exec); -1 on failure.
func dupFD(fd int) int {
	syscall.ForkLock.RLock()
	nfd, err := syscall.Dup(fd)
	if err == nil {
		syscall.CloseOnExec(nfd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return -1
	}
	return nfd
}

// dupListener duplicates a listener's descriptor; -1 on failure.
func dupListener(ln net.Listener) int { return dupSocket(ln) }

// dupServerFD duplicates a server connection's descriptor; -1 on failure.
func dupServerFD(srv *server) int { return dupSocket(srv.conn) }

// dupSocket duplicates the descriptor under a listener or connection of
// package net; -1 on failure (or for anything else, a TLS conn included).
func dupSocket(v any) int {
	sc, ok := v.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	rc.Control(func(s uintptr) { fd = dupFD(int(s)) })
	return fd
}

func closeFD(fd int) { syscall.Close(fd) }

// fileConn makes a net.Conn of a descriptor handed over; fd is closed
// (the conn holds a duplicate).
func fileConn(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "server")
	defer f.Close()
	conn, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		tc.SetKeepAlive(true)
	}
	return conn, nil
}

// takeoverTimeout bounds each step of a takeover but SUSPEND's wait, which
// suspend_timeout bounds on the old process's side.
const takeoverTimeout = 10 * time.Second

// ErrNoOldProcess is TakeOver's answer when nothing listens on the Unix
// socket: there is no process to take over (PgBouncer then starts
// normally).
var ErrNoOldProcess = errors.New("old process not found")

// TakeOver is pgturnstile -R's first step: it logs in to the running
// process's console at socketPath as the pooler's own OS user, suspends
// it, and receives its listeners and its clients at rest (SHOW FDS). The
// old process holds on to all of it until Commit (SHUTDOWN); Abort, or
// the connection's end, has it resume. suspendWait bounds the SUSPEND
// (the old process's suspend_timeout, and some).
//
// Before it sends anything, TakeOver checks who listens there: a process
// of this process's user, or root (SO_PEERCRED). A Unix socket directory
// such as /tmp lets anyone bind the name while the pooler is down. Every
// row of SHOW FDS is checked too (a known task, a sane state, a
// descriptor of the right kind: fdcheck.Check); the user and database of each
// are checked against the configuration by Service.CheckHandover. On an
// error every descriptor received is closed.
func TakeOver(socketPath string, suspendWait time.Duration) (*Handover, error) {
	conn, err := net.DialTimeout("unix", socketPath, takeoverTimeout)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoOldProcess, err)
	}
	t := &takeoverConn{uc: conn.(*net.UnixConn), path: socketPath}
	if err := checkPeer(t.uc, socketPath); err != nil {
		t.uc.Close()
		return nil, err
	}
	h, err := t.run(suspendWait)
	if err != nil {
		for _, fd := range t.fds {
			closeFD(fd)
		}
		if h != nil {
			h.Abort()
		}
		t.uc.Close()
		return nil, err
	}
	h.conn = t
	return h, nil
}

// checkPeer refuses a process on the socket that runs as another user
// than this one (root excepted).
func checkPeer(uc *net.UnixConn, path string) error {
	uid, ok := netpoll.PeerUID(uc)
	if !ok {
		return fmt.Errorf("%w: cannot tell which user runs the process on %s", ErrRefused, path)
	}
	if me := os.Getuid(); uid != me && uid != 0 {
		return fmt.Errorf("%w: the process on %s runs as uid %d, not as this process's uid %d or root", ErrRefused, path, uid, me)
	}
	return nil
}

// Commit is the takeover's last step: SHUTDOWN tells the old process to
// let go of what SHOW FDS passed, and it closes the connection once it
// has. Before Commit nothing was taken from it: every check and every
// bind that can fail comes first, and a failure there is an Abort. An
// error means the SHUTDOWN could not be sent: the old process goes on,
// and the caller aborts.
func (h *Handover) Commit() error {
	t := h.conn
	if t == nil {
		return errors.New("takeover: no connection to the old process")
	}
	if err := t.send(wire.AppendQuery(nil, "SHUTDOWN;")); err != nil {
		return err
	}
	h.conn = nil
	defer t.uc.Close()
	for _, ln := range h.Listeners {
		if ul, ok := ln.(*net.UnixListener); ok {
			// Ours now: removed when this process ends, as one it
			// bound itself.
			ul.SetUnlinkOnClose(true)
		}
	}
	// The old process's answer is to close the connection once it has
	// let go; a read that fails otherwise changes nothing now.
	t.uc.SetReadDeadline(time.Now().Add(takeoverTimeout))
	for t.fill() == nil {
		t.buf = t.buf[:0]
	}
	return nil
}

// Abort gives the takeover up before Commit: every descriptor received is
// closed (a Unix listener without removing its name, which is still the
// old process's) and so is the connection, at whose end the old process
// resumes.
func (h *Handover) Abort() {
	for _, ln := range h.Listeners {
		if ul, ok := ln.(*net.UnixListener); ok {
			ul.SetUnlinkOnClose(false)
		}
		ln.Close()
	}
	h.Listeners = nil
	if h.Metrics != nil {
		h.Metrics.Close()
		h.Metrics = nil
	}
	for _, m := range append(h.clients, h.servers...) {
		closeFD(m.fd)
	}
	h.clients, h.servers = nil, nil
	if h.conn != nil {
		h.conn.uc.Close()
		h.conn = nil
	}
}

// takeoverConn reads the old process's replies with the descriptors that
// come with them, in order: the k-th DataRow of SHOW FDS carries the k-th
// descriptor.
type takeoverConn struct {
	uc   *net.UnixConn
	path string // the console's socket: the one Unix listener's name
	buf  []byte // bytes read, not yet taken
	fds  []int  // descriptors received, not yet taken
}

func (t *takeoverConn) run(suspendWait time.Duration) (*Handover, error) {
	start := wire.AppendStartup(nil, []wire.Param{{Name: "user", Value: adminDB}, {Name: "database", Value: adminDB}, {Name: "application_name", Value: "pgturnstile takeover"}})
	if err := t.send(start); err != nil {
		return nil, err
	}
	if _, err := t.untilReady(takeoverTimeout, nil); err != nil {
		return nil, fmt.Errorf("login: %w", err)
	}
	if err := t.send(wire.AppendQuery(nil, "SUSPEND;")); err != nil {
		return nil, err
	}
	if _, err := t.untilReady(suspendWait+takeoverTimeout, nil); err != nil {
		return nil, fmt.Errorf("SUSPEND: %w", err)
	}
	if err := t.send(wire.AppendQuery(nil, "SHOW FDS;")); err != nil {
		return nil, err
	}
	h := &Handover{}
	var names []string
	rows := 0
	_, err := t.untilReady(takeoverTimeout, func(typ byte, body []byte) error {
		switch typ {
		case 'T':
			names = rowDescriptionNames(body)
		case 'D':
			rows++
			if len(t.fds) == 0 {
				return fmt.Errorf("%w: SHOW FDS row %d came without its descriptor", ErrRefused, rows)
			}
			fd := t.fds[0]
			t.fds = t.fds[1:]
			if err := h.add(fd, rowValues(names, body), t.path); err != nil {
				return fmt.Errorf("%w: SHOW FDS row %d %v", ErrRefused, rows, err)
			}
		}
		return nil
	})
	if err != nil {
		return h, fmt.Errorf("SHOW FDS: %w", err)
	}
	if len(t.fds) > 0 {
		return h, fmt.Errorf("%w: SHOW FDS sent %d descriptors more than rows", ErrRefused, len(t.fds))
	}
	if err := h.checkLinks(); err != nil {
		return h, fmt.Errorf("%w: SHOW FDS: %v", ErrRefused, err)
	}
	return h, nil
}

// add takes one SHOW FDS row with its descriptor, once both are what a
// pgturnstile hands over (checkRow, fdcheck.Check); fd is closed otherwise.
// socketPath is the console's socket, the one Unix listener there is.
func (h *Handover) add(fd int, row map[string]string, socketPath string) error {
	var st movedState
	if err := json.Unmarshal([]byte(row["pgturnstile_state"]), &st); err != nil {
		closeFD(fd)
		return fmt.Errorf("(%s): pgturnstile_state: %v", row["task"], err)
	}
	task := row["task"]
	oldFD, link, err := rowLink(task, row)
	if err == nil {
		err = checkRow(task, row, st)
	}
	if err != nil {
		closeFD(fd)
		return fmt.Errorf("(%s): %v", task, err)
	}
	if err := fdcheck.Check(fd, fdcheck.Claim{Task: task, Network: st.Network, Address: st.Address,
		Local: st.Local, Laddr: st.Laddr, Raddr: st.Raddr, Endpoint: st.Endpoint, SocketPath: socketPath}); err != nil {
		closeFD(fd)
		return fmt.Errorf("(%s %s@%s): descriptor %d: %v", task, row["user"], row["database"], fd, err)
	}
	switch task {
	case "pooler":
		f := os.NewFile(uintptr(fd), "listener")
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("(pooler): listener %s: %v", st.Address, err)
		}
		if st.Metrics {
			h.Metrics = ln
		} else {
			h.Listeners = append(h.Listeners, ln)
		}
	case "client":
		h.clients = append(h.clients, movedClient{fd: fd, user: row["user"], database: row["database"], state: st, oldFD: oldFD, link: link})
	case "server":
		h.servers = append(h.servers, movedClient{fd: fd, user: row["user"], database: row["database"], state: st, oldFD: oldFD, link: link})
	}
	return nil
}

// rowLink reads a row's fd and link columns: its descriptor in the old
// process, and the linked row's (0: none; a listener has none).
func rowLink(task string, row map[string]string) (oldFD, link int, err error) {
	oldFD, err = strconv.Atoi(row["fd"])
	if err != nil || oldFD < 0 {
		return 0, 0, fmt.Errorf("fd %q is not a descriptor", row["fd"])
	}
	if v, ok := row["link"]; ok {
		link, err = strconv.Atoi(v)
		if err != nil || link < 0 {
			return 0, 0, fmt.Errorf("link %q is not a descriptor", v)
		}
	}
	if link != 0 && task == "pooler" {
		return 0, 0, errors.New("a listener linked to another row")
	}
	return oldFD, link, nil
}

func (t *takeoverConn) send(b []byte) error {
	t.uc.SetWriteDeadline(time.Now().Add(takeoverTimeout))
	_, err := t.uc.Write(b)
	return err
}

// fill reads more bytes, and the descriptors that come with them.
func (t *takeoverConn) fill() error {
	if cap(t.buf)-len(t.buf) < 4096 {
		nb := make([]byte, len(t.buf), 2*cap(t.buf)+8192)
		copy(nb, t.buf)
		t.buf = nb
	}
	oob := make([]byte, syscall.CmsgSpace(64*4))
	n, oobn, _, _, err := t.uc.ReadMsgUnix(t.buf[len(t.buf):cap(t.buf)], oob)
	if oobn > 0 {
		msgs, perr := syscall.ParseSocketControlMessage(oob[:oobn])
		if perr == nil {
			for i := range msgs {
				if fds, err := syscall.ParseUnixRights(&msgs[i]); err == nil {
					t.fds = append(t.fds, fds...)
				}
			}
		}
	}
	t.buf = t.buf[:len(t.buf)+n]
	if n == 0 && err == nil {
		return io.EOF
	}
	return err
}

// untilReady reads messages until ReadyForQuery, handing each other one to
// each (if not nil). An ErrorResponse is the error returned.
func (t *takeoverConn) untilReady(timeout time.Duration, each func(typ byte, body []byte) error) (byte, error) {
	t.uc.SetReadDeadline(time.Now().Add(timeout))
	var failed error
	for {
		for len(t.buf) >= 5 {
			typ := t.buf[0]
			n := int(binary.BigEndian.Uint32(t.buf[1:5]))
			if n < 4 || n > 1<<30 {
				return 0, errors.New("bad message from the old process")
			}
			if len(t.buf) < 1+n {
				break
			}
			body := t.buf[5 : 1+n]
			switch typ {
			case 'Z':
				t.buf = t.buf[1+n:]
				return typ, failed
			case 'E':
				if failed == nil {
					failed = errors.New(takeoverErrorMessage(body))
				}
			case 'R':
				if len(body) >= 4 && binary.BigEndian.Uint32(body) != 0 {
					return 0, errors.New("the old process asks for a password: is this the same OS user?")
				}
			default:
				if each != nil && failed == nil {
					if err := each(typ, body); err != nil {
						failed = err
					}
				}
			}
			t.buf = t.buf[1+n:]
		}
		if err := t.fill(); err != nil {
			if failed != nil {
				return 0, failed
			}
			return 0, err
		}
	}
}

// takeoverErrorMessage is an ErrorResponse's message field.
func takeoverErrorMessage(body []byte) string {
	for len(body) > 1 {
		code := body[0]
		end := 1
		for end < len(body) && body[end] != 0 {
			end++
		}
		if code == 'M' {
			return string(body[1:end])
		}
		body = body[min(end+1, len(body)):]
	}
	return "error from the old process"
}

// rowDescriptionNames are a RowDescription's column names.
func rowDescriptionNames(body []byte) []string {
	if len(body) < 2 {
		return nil
	}
	n := int(binary.BigEndian.Uint16(body))
	body = body[2:]
	names := make([]string, 0, n)
	for range n {
		end := 0
		for end < len(body) && body[end] != 0 {
			end++
		}
		names = append(names, string(body[:end]))
		if end+1+18 > len(body) {
			break
		}
		body = body[end+1+18:]
	}
	return names
}

// rowValues maps a DataRow's text values to their columns' names.
func rowValues(names []string, body []byte) map[string]string {
	out := map[string]string{}
	if len(body) < 2 {
		return out
	}
	n := int(binary.BigEndian.Uint16(body))
	body = body[2:]
	for i := 0; i < n && len(body) >= 4; i++ {
		l := int(int32(binary.BigEndian.Uint32(body)))
		body = body[4:]
		if l < 0 || l > len(body) {
			continue // NULL
		}
		if i < len(names) {
			out[names[i]] = string(body[:l])
		}
		body = body[l:]
	}
	return out
}

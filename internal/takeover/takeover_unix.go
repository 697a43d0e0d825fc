//go:build !windows

package takeover

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/fdcheck"
	"github.com/pgturnstile/pgturnstile/internal/netpoll"
	"github.com/pgturnstile/pgturnstile/wire"
)

// stepTimeout bounds each step of a takeover but SUSPEND's wait, which
// suspend_timeout bounds on the old process's side.
const stepTimeout = 10 * time.Second

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
// descriptor of the right kind: fdcheck.Check); the user and database of
// each are checked against the configuration by CheckConfig. On an
// error every descriptor received is closed.
func TakeOver(socketPath string, suspendWait time.Duration) (*Handover, error) {
	nc, err := net.DialTimeout("unix", socketPath, stepTimeout)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoOldProcess, err)
	}
	t := &conn{uc: nc.(*net.UnixConn), path: socketPath}
	if err := checkPeer(t.uc, socketPath); err != nil {
		t.uc.Close()
		return nil, err
	}
	h, err := t.run(suspendWait)
	if err != nil {
		for _, fd := range t.fds {
			Close(fd)
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
	t.uc.SetReadDeadline(time.Now().Add(stepTimeout))
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
	for _, m := range append(h.Clients, h.Servers...) {
		Close(m.FD)
	}
	h.Clients, h.Servers = nil, nil
	if h.conn != nil {
		h.conn.uc.Close()
		h.conn = nil
	}
}

// conn reads the old process's replies with the descriptors that come
// with them, in order: the k-th DataRow of SHOW FDS carries the k-th
// descriptor.
type conn struct {
	uc   *net.UnixConn
	path string // the console's socket: the one Unix listener's name
	buf  []byte // bytes read, not yet taken
	fds  []int  // descriptors received, not yet taken
}

func (t *conn) run(suspendWait time.Duration) (*Handover, error) {
	start := wire.AppendStartup(nil, []wire.Param{{Name: "user", Value: consoleDB}, {Name: "database", Value: consoleDB}, {Name: "application_name", Value: "pgturnstile takeover"}})
	if err := t.send(start); err != nil {
		return nil, err
	}
	if _, err := t.untilReady(stepTimeout, nil); err != nil {
		return nil, fmt.Errorf("login: %w", err)
	}
	if err := t.send(wire.AppendQuery(nil, "SUSPEND;")); err != nil {
		return nil, err
	}
	if _, err := t.untilReady(suspendWait+stepTimeout, nil); err != nil {
		return nil, fmt.Errorf("SUSPEND: %w", err)
	}
	if err := t.send(wire.AppendQuery(nil, "SHOW FDS;")); err != nil {
		return nil, err
	}
	h := &Handover{}
	var names []string
	rows := 0
	_, err := t.untilReady(stepTimeout, func(typ byte, body []byte) error {
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
// pgturnstile hands over (CheckRow, fdcheck.Check); fd is closed otherwise.
// socketPath is the console's socket, the one Unix listener there is.
func (h *Handover) add(fd int, row map[string]string, socketPath string) error {
	var st State
	if err := json.Unmarshal([]byte(row["pgturnstile_state"]), &st); err != nil {
		Close(fd)
		return fmt.Errorf("(%s): pgturnstile_state: %v", row["task"], err)
	}
	task := row["task"]
	oldFD, link, err := rowLink(task, row)
	if err == nil {
		err = CheckRow(task, row, st)
	}
	if err != nil {
		Close(fd)
		return fmt.Errorf("(%s): %v", task, err)
	}
	if err := fdcheck.Check(fd, fdcheck.Claim{Task: task, Network: st.Network, Address: st.Address,
		Local: st.Local, Laddr: st.Laddr, Raddr: st.Raddr, Endpoint: st.Endpoint, SocketPath: socketPath}); err != nil {
		Close(fd)
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
		h.Clients = append(h.Clients, Row{FD: fd, User: row["user"], Database: row["database"], State: st, OldFD: oldFD, Link: link})
	case "server":
		h.Servers = append(h.Servers, Row{FD: fd, User: row["user"], Database: row["database"], State: st, OldFD: oldFD, Link: link})
	}
	return nil
}

func (t *conn) send(b []byte) error {
	t.uc.SetWriteDeadline(time.Now().Add(stepTimeout))
	_, err := t.uc.Write(b)
	return err
}

// fill reads more bytes, and the descriptors that come with them.
func (t *conn) fill() error {
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
func (t *conn) untilReady(timeout time.Duration, each func(typ byte, body []byte) error) (byte, error) {
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
					failed = errors.New(errorMessage(body))
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

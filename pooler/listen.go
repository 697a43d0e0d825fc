package pooler

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/listener"
	"github.com/pgturnstile/pgturnstile/internal/sockopt"
)

// The listeners: opened (listen_addr, listen_port, unix_socket_dir) or
// handed over, accepted on, and closed at a shutdown, and their options
// (listen_backlog, tcp_socket_buffer, tcp_defer_accept) applied again at
// RELOAD and SET. The options themselves, tcp_* on every connection and
// so_reuseport are internal/sockopt's; raw accept and the Unix socket's
// checks internal/listener's.

// WithListeners hands the service listening sockets opened elsewhere:
// passed by systemd (socket activation) or taken over from the process an
// online restart replaces. Listen serves exactly these and binds nothing
// of its own; listen_addr, listen_port and unix_socket_dir then only
// describe them.
func WithListeners(lns []net.Listener) Option {
	return func(s *Service) { s.inherited = lns }
}

// Listen opens the TCP listeners of listen_addr/listen_port and the Unix
// socket in unix_socket_dir. Each TCP listener is logged as
// "listening on ADDR:PORT" with the real port (listen_port = 0 picks one).
// With WithListeners it serves the listeners it was handed instead.
func (s *Service) Listen() error {
	st := s.settings()
	if s.inherited != nil {
		for _, ln := range s.inherited {
			s.log.Info("listening on " + listenerName(ln) + " (inherited)")
			if _, isTCP := ln.(*net.TCPListener); isTCP {
				// As PgBouncer tunes a socket systemd hands it: the
				// connections accepted from now on get the sizes.
				if err := sockopt.SetListenerBuffers(ln, st.TCPSocketBuffer); err != nil {
					s.log.Warn("tcp_socket_buffer on " + listenerName(ln) + ": " + err.Error())
				}
			}
		}
		s.mu.Lock()
		s.listeners = append(s.listeners, s.inherited...)
		s.mu.Unlock()
		if len(s.listeners) == 0 {
			return errors.New("nothing to listen on: no listening socket was handed over")
		}
		return nil
	}
	var addrs []string
	for _, a := range strings.Split(st.ListenAddr, ",") {
		a = strings.TrimSpace(a)
		switch a {
		case "":
		case "*":
			addrs = append(addrs, "")
		default:
			addrs = append(addrs, a)
		}
	}
	port := st.ListenPort
	for _, a := range addrs {
		ln, err := sockopt.ListenTCP(st.SoReuseport, net.JoinHostPort(a, strconv.Itoa(port)))
		if err != nil {
			s.Close()
			return err
		}
		if err := s.tuneListener(ln); err != nil {
			ln.Close()
			s.Close()
			return err
		}
		if port == 0 {
			// Every address shares the port picked for the first.
			port = ln.Addr().(*net.TCPAddr).Port
		}
		s.log.Info("listening on " + ln.Addr().String())
		s.listeners = append(s.listeners, ln)
	}
	if dir := st.UnixSocketDir; dir != "" {
		path := listener.UnixSocketPath(dir, port)
		if err := listener.ClearUnixSocket(path); err != nil {
			s.Close()
			return err
		}
		ln, err := net.Listen("unix", path)
		if err == nil {
			err = s.tuneListener(ln)
			if err == nil {
				err = sockopt.ChownUnixSocket(path, st.UnixSocketMode, st.UnixSocketGroup)
			}
			if err != nil {
				ln.Close()
			}
		}
		if err != nil {
			s.Close()
			return err
		}
		s.log.Info("listening on unix:" + path)
		s.listeners = append(s.listeners, ln)
	}
	if len(s.listeners) == 0 {
		return errors.New("nothing to listen on: set listen_addr or unix_socket_dir")
	}
	return nil
}

// listenerName is a listener's address as the log writes it: ADDR:PORT,
// or unix:PATH.
func listenerName(ln net.Listener) string {
	if a, ok := ln.Addr().(*net.UnixAddr); ok {
		return "unix:" + a.Name
	}
	return ln.Addr().String()
}

// Addrs returns the listening addresses.
func (s *Service) Addrs() []net.Addr {
	out := make([]net.Addr, len(s.listeners))
	for i, ln := range s.listeners {
		out[i] = ln.Addr()
	}
	return out
}

func (s *Service) accept(ln net.Listener) error {
	defer s.countTCPAccept(ln)()
	inherited := slices.Contains(s.inherited, ln)
	accept, stop := listener.StartAccept(ln)
	defer stop()
	for {
		conn, err := accept()
		if err != nil {
			var ne net.Error
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// SUSPEND's deadline: wait for RESUME.
				s.acceptPaused(ln)
				continue
			}
			if errors.As(err, &ne) && ne.Timeout() {
				// A back-off after a temporary Accept error (as
				// net/http's), not a poll on a condition: nothing
				// notifies when the error has passed.
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		if tc, ok := sockopt.TCP(conn); ok {
			if err := sockopt.Tune(tc, s.settings(), inherited); err != nil {
				// PgBouncer drops a connection it cannot tune.
				s.log.Warn(err.Error())
				conn.Close()
				continue
			}
		}
		s.serveConn(conn)
	}
}

// Close stops accepting clients and closes the listeners.
func (s *Service) Close() {
	s.shuttingDown.Store(true)
	s.mu.Lock()
	lns := s.listeners
	s.mu.Unlock()
	for _, ln := range lns {
		listener.Close(ln)
	}
}

// closeTCP starts a graceful shutdown: new logins are refused and the TCP
// listeners close, but the Unix socket stays open until the shutdown
// completes, so that the console stays reachable while clients drain
// (PgBouncer's cleanup_tcp_sockets); logins to other databases through it
// are refused ("pooler is shutting down").
func (s *Service) closeTCP() {
	s.shuttingDown.Store(true)
	s.mu.Lock()
	lns := s.listeners
	s.mu.Unlock()
	for _, ln := range lns {
		if _, unix := ln.(*net.UnixListener); !unix {
			listener.Close(ln)
		}
	}
}

// The listeners' options that a RELOAD or SET re-applies to the listeners
// open.

// tuneListener sets listen_backlog and, on a TCP listener,
// TCP_DEFER_ACCEPT. Go has no backlog parameter (it listens with the
// kernel's somaxconn); listen(2) called again on a listening socket sets
// the new backlog, which Linux and the BSDs allow, and which is what is
// done here.
func (s *Service) tuneListener(ln net.Listener) error {
	st := s.settings()
	if err := sockopt.SetBacklog(ln, st.ListenBacklog); err != nil {
		return fmt.Errorf("cannot listen on %s: listen(): %w", ln.Addr(), err)
	}
	if _, isTCP := ln.(*net.TCPListener); isTCP {
		if err := sockopt.SetListenerBuffers(ln, st.TCPSocketBuffer); err != nil {
			return fmt.Errorf("cannot listen on %s: %w", ln.Addr(), err)
		}
		if err := sockopt.SetDeferAccept(ln, st.TCPDeferAccept != 0); err != nil {
			// PgBouncer warns and listens on.
			s.log.Warn((&deferAcceptError{on: st.TCPDeferAccept != 0, err: err}).Error())
		}
	}
	return nil
}

// applySocketBuffers gives the TCP listeners open a tcp_socket_buffer that
// a RELOAD or SET changed to a non-zero size (back to 0, the sizes set stay
// until the listeners are opened again: the OS default cannot be asked
// for once overridden).
func (s *Service) applySocketBuffers(n int) {
	for _, ln := range s.tcpListeners() {
		if err := sockopt.SetListenerBuffers(ln, n); err != nil {
			s.log.Warn("tcp_socket_buffer on " + ln.Addr().String() + ": " + err.Error())
		}
	}
}

// tcpListeners is a copy of the service's TCP listeners open now.
func (s *Service) tcpListeners() []net.Listener {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []net.Listener
	for _, ln := range s.listeners {
		if _, isTCP := ln.(*net.TCPListener); isTCP {
			out = append(out, ln)
		}
	}
	return out
}

// deferAcceptError is a TCP_DEFER_ACCEPT that could not be set: logged as
// PgBouncer's warning, not fatal.
type deferAcceptError struct {
	on  bool
	err error
}

func (e *deferAcceptError) Error() string {
	act := "uninstall"
	if e.on {
		act = "install"
	}
	return "tune_accept: " + act + " TCP_DEFER_ACCEPT: " + e.err.Error()
}

// applyDeferAccept turns TCP_DEFER_ACCEPT on or off on the TCP listeners
// open when tcp_defer_accept changes between zero and non-zero (RELOAD,
// SET), as PgBouncer's pooler_tune_accept.
func (s *Service) applyDeferAccept(on bool) {
	for _, ln := range s.tcpListeners() {
		if err := sockopt.SetDeferAccept(ln, on); err != nil {
			s.log.Warn((&deferAcceptError{on: on, err: err}).Error())
		}
	}
}

package pooler

import (
	"fmt"
	"net"

	"github.com/pgturnstile/pgturnstile/internal/sockopt"
)

// The listeners' options that a RELOAD or SET re-applies to the listeners
// open; the options themselves are internal/sockopt's.

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

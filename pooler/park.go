package pooler

import (
	"errors"
	"runtime/debug"
	"sync"
	"syscall"
	"time"
)

// Parking idle clients.
//
// A logged-in client normally costs a goroutine blocked in a read (its
// stack) and a read buffer, even when it sends nothing for hours, and
// applications keep thousands of such connections open. A client that has
// been idle for parkAfter (no server, nothing buffered, plain TCP or Unix
// socket, no client_idle_timeout to enforce) is parked instead: its read
// buffer is dropped, its socket is watched by one epoll set for the whole
// service, and its goroutine ends. When the socket becomes readable (a
// request, or the client hanging up), a new goroutine picks the client up
// where it was. Busy clients never park, so the hot path pays nothing: the
// janitor asks an idle client to park by expiring its read deadline.

// parkAfter is how long a client must have been idle before it is parked.
const parkAfter = time.Second

// parkScanEvery is how often the janitor looks for clients to park.
const parkScanEvery = time.Second

// parker is the service's epoll set of parked clients.
type parker struct {
	once sync.Once
	epfd int
	err  error

	mu     sync.Mutex
	parked map[int32]*client // by socket descriptor
	// freedAt is len(parked) at the last FreeOSMemory: many clients going
	// idle together hand their stacks and buffers back to the OS at once.
	freedAt int
}

// start creates the epoll set and its goroutine on first use.
func (pk *parker) start() error {
	pk.once.Do(func() {
		pk.epfd, pk.err = syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if pk.err != nil {
			return
		}
		pk.parked = map[int32]*client{}
		go pk.run()
	})
	return pk.err
}

// run wakes parked clients whose socket became readable or hung up. The
// wait is a blocking system call on a thread of its own.
func (pk *parker) run() {
	events := make([]syscall.EpollEvent, 128)
	for {
		n, err := syscall.EpollWait(pk.epfd, events, -1)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			return
		}
		for _, ev := range events[:n] {
			// Under mu, so a client parking on the same descriptor
			// later cannot have its registration removed by this DEL.
			pk.mu.Lock()
			c := pk.parked[ev.Fd]
			delete(pk.parked, ev.Fd)
			_ = syscall.EpollCtl(pk.epfd, syscall.EPOLL_CTL_DEL, int(ev.Fd), nil)
			pk.mu.Unlock()
			if c != nil {
				go c.serveLoggedIn()
			}
		}
	}
}

// requestParks asks every client idle for parkAfter to park; called by the
// janitor. It also returns memory to the OS when many clients parked since
// the last time.
func (s *Service) requestParks(now time.Time) {
	if st := s.settings(); st.ClientIdleTimeout > 0 {
		return // the idle timeout is enforced by the blocked read
	}
	for _, c := range s.allClients() {
		// A request whose deadline serve cleared before reading is
		// simply made again.
		if !c.inLoop.Load() || c.tls {
			continue
		}
		c.mu.Lock()
		idle := c.srv == nil && !c.waiting && !c.skipToSync &&
			now.Sub(c.connected) >= parkAfter && (c.queryStart.IsZero() || now.Sub(c.queryStart) >= parkAfter)
		if idle {
			c.parkWanted.Store(true)
			// Wakes serve's blocked read; it parks if nothing arrived.
			c.conn.SetReadDeadline(now)
		}
		c.mu.Unlock()
	}
	pk := &s.parker
	pk.mu.Lock()
	n := len(pk.parked)
	free := n-pk.freedAt >= 256
	if free || n < pk.freedAt {
		pk.freedAt = n
	}
	pk.mu.Unlock()
	if free {
		debug.FreeOSMemory()
	}
}

// tryPark parks c after its read timed out on a park request; true when
// serve's goroutine must end now without touching c again.
func (c *client) tryPark() bool {
	c.parkWanted.Store(false)
	c.conn.SetReadDeadline(time.Time{})
	c.mu.Lock()
	idle := c.srv == nil && !c.waiting && !c.skipToSync
	c.mu.Unlock()
	if !idle || c.w.Buffered() > 0 || !c.r.DropBuffer() {
		return false
	}
	sc, ok := c.conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	pk := &c.svc.parker
	if pk.start() != nil {
		return false
	}
	// serve's own buffers grow again when needed.
	c.scratch, c.out, c.big = nil, nil, nil
	c.poolWait = nil
	parked := false
	cerr := rc.Control(func(fd uintptr) {
		pk.mu.Lock()
		defer pk.mu.Unlock()
		pk.parked[int32(fd)] = c
		c.parkFD = int32(fd)
		// Level-triggered and one-shot: bytes that arrived before this
		// call are reported at once, and one wake-up resumes the client
		// once.
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT, Fd: int32(fd)}
		if err := syscall.EpollCtl(pk.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev); err != nil {
			delete(pk.parked, int32(fd))
			return
		}
		parked = true
	})
	return cerr == nil && parked
}

// unpark resumes c if it is parked, before its socket is closed from
// outside (KILL_CLIENT, shutdown): its goroutine then sees the closed
// socket and ends the client as usual.
func (s *Service) unpark(c *client) {
	pk := &s.parker
	pk.mu.Lock()
	if pk.parked == nil || pk.parked[c.parkFD] != c {
		pk.mu.Unlock()
		return
	}
	delete(pk.parked, c.parkFD)
	_ = syscall.EpollCtl(pk.epfd, syscall.EPOLL_CTL_DEL, int(c.parkFD), nil)
	pk.mu.Unlock()
	go c.serveLoggedIn()
}

// ParkedClients is how many clients are parked now.
func (s *Service) ParkedClients() int {
	pk := &s.parker
	pk.mu.Lock()
	defer pk.mu.Unlock()
	return len(pk.parked)
}

package pooler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/wire"
)

// Service is the pooler: listeners, clients, pools. "Server" in this package
// always means a Postgres backend connection.
type Service struct {
	log *slog.Logger

	cfg      atomic.Pointer[config.Config]
	userlist atomic.Pointer[map[string]auth.Secret]
	// tracked maps a lower-cased parameter name to its canonical spelling,
	// for the parameters that follow a client from server to server.
	tracked map[string]string

	clientCount  atomic.Int64
	shuttingDown atomic.Bool

	mu         sync.Mutex
	pools      map[poolKey]*Pool
	dbLimits   map[string]*limiter
	userLimits map[string]*limiter
	listeners  []net.Listener

	cancelMu sync.Mutex
	cancels  map[[8]byte]*client

	// stmts is the pooler-wide registry of mapped prepared statements.
	stmts *stmtRegistry

	wg sync.WaitGroup
}

// alwaysTracked are the parameters PgBouncer always carries across servers;
// track_extra_parameters adds more.
var alwaysTracked = []string{"client_encoding", "DateStyle", "TimeZone", "standard_conforming_strings", "application_name"}

// New builds a Service for cfg; it reads auth_file.
func New(cfg *config.Config, log *slog.Logger) (*Service, error) {
	s := &Service{
		log:        log,
		tracked:    map[string]string{},
		pools:      map[poolKey]*Pool{},
		dbLimits:   map[string]*limiter{},
		userLimits: map[string]*limiter{},
		cancels:    map[[8]byte]*client{},
		stmts:      newStmtRegistry(),
	}
	for _, n := range alwaysTracked {
		s.tracked[strings.ToLower(n)] = n
	}
	for _, n := range cfg.Settings.TrackExtraParameters {
		s.tracked[strings.ToLower(n)] = n
	}
	if err := s.Reload(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload swaps in a new configuration and re-reads auth_file. Existing pools
// keep their servers; their limits follow the new file.
func (s *Service) Reload(cfg *config.Config) error {
	users := map[string]auth.Secret{}
	if f := cfg.Settings.AuthFile; f != "" {
		raw, err := config.LoadUserlist(f)
		if err != nil {
			return err
		}
		for name, secret := range raw {
			sec, err := auth.ParseSecret(secret)
			if err != nil {
				return fmt.Errorf("%s: user %q: %v", f, name, err)
			}
			users[name] = sec
		}
	}
	s.userlist.Store(&users)
	s.cfg.Store(cfg)
	s.mu.Lock()
	pools := make([]*Pool, 0, len(s.pools))
	for _, p := range s.pools {
		pools = append(pools, p)
	}
	s.mu.Unlock()
	for _, p := range pools {
		p.mu.Lock()
		p.eff = cfg.Resolve(p.db, p.key.user)
		p.mu.Unlock()
		p.kick()
	}
	for _, w := range cfg.Warnings {
		s.log.Warn(w)
	}
	return nil
}

func (s *Service) config() *config.Config     { return s.cfg.Load() }
func (s *Service) settings() *config.Settings { return &s.cfg.Load().Settings }
func (s *Service) logConnections() bool       { return s.settings().LogConnections }
func (s *Service) logDisconnections() bool    { return s.settings().LogDisconnections }

// trackedName returns the canonical name of a tracked parameter, or "".
func (s *Service) trackedName(name string) string { return s.tracked[strings.ToLower(name)] }

// secret returns a user's auth_file secret.
func (s *Service) secret(user string) (auth.Secret, bool) {
	sec, ok := (*s.userlist.Load())[user]
	return sec, ok
}

// Listen opens the TCP listeners of listen_addr/listen_port and the Unix
// socket in unix_socket_dir. Each TCP listener is logged as
// "listening on ADDR:PORT" with the real port (listen_port = 0 picks one).
func (s *Service) Listen() error {
	st := s.settings()
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
		ln, err := net.Listen("tcp", net.JoinHostPort(a, strconv.Itoa(port)))
		if err != nil {
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
		path := filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(port))
		if _, err := os.Stat(path); err == nil {
			// A stale socket of a process that died; a live one would
			// have refused our TCP bind on the same port already.
			os.Remove(path)
		}
		ln, err := net.Listen("unix", path)
		if err != nil {
			s.Close()
			return err
		}
		if st.UnixSocketMode != 0 {
			os.Chmod(path, os.FileMode(st.UnixSocketMode))
		}
		s.log.Info("listening on unix:" + path)
		s.listeners = append(s.listeners, ln)
	}
	if len(s.listeners) == 0 {
		return errors.New("nothing to listen on: set listen_addr or unix_socket_dir")
	}
	return nil
}

// Addrs returns the listening addresses.
func (s *Service) Addrs() []net.Addr {
	out := make([]net.Addr, len(s.listeners))
	for i, ln := range s.listeners {
		out[i] = ln.Addr()
	}
	return out
}

// Serve accepts clients until ctx is done or the listeners close.
func (s *Service) Serve(ctx context.Context) error {
	jctx, stop := context.WithCancel(ctx)
	defer stop()
	go s.janitor(jctx)
	errc := make(chan error, len(s.listeners))
	for _, ln := range s.listeners {
		go func(ln net.Listener) { errc <- s.accept(ln) }(ln)
	}
	select {
	case <-ctx.Done():
		s.Close()
		return nil
	case err := <-errc:
		if s.shuttingDown.Load() {
			return nil
		}
		s.Close()
		return err
	}
}

func (s *Service) accept(ln net.Listener) error {
	for {
		conn, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
			tc.SetKeepAlive(true)
		}
		s.clientCount.Add(1)
		c := &client{
			svc:       s,
			id:        clientIDs.Add(1),
			conn:      conn,
			r:         wire.NewReader(conn, wire.DefaultBufferSize),
			w:         wire.NewWriter(conn, wire.DefaultBufferSize),
			connected: time.Now(),
		}
		c.writerDone.L = &c.mu
		c.cancelWait = make(chan struct{}, 1)
		c.log = s.log.With("conn", c.String(), "addr", conn.RemoteAddr().String())
		s.wg.Add(1)
		go c.serve()
	}
}

// clientClosed forgets a client when its goroutine ends.
func (s *Service) clientClosed(c *client) {
	s.clientCount.Add(-1)
	s.cancelMu.Lock()
	if s.cancels[c.key] == c {
		delete(s.cancels, c.key)
	}
	s.cancelMu.Unlock()
	if c.pool != nil {
		c.pool.addClient(-1)
	}
	c.mu.Lock()
	c.clearStmtsLocked()
	c.mu.Unlock()
	s.wg.Done()
}

func (s *Service) registerCancel(c *client) {
	s.cancelMu.Lock()
	s.cancels[c.key] = c
	s.cancelMu.Unlock()
}

// cancel forwards a CancelRequest to the server running that client's
// query. The client's lock is held while the cancel is delivered, so the
// server cannot be released to another client meanwhile and the cancel
// cannot hit someone else's query. Unknown keys and idle clients are
// ignored, as Postgres does.
func (s *Service) cancel(key [8]byte) {
	s.cancelMu.Lock()
	c := s.cancels[key]
	s.cancelMu.Unlock()
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiting {
		select {
		case c.cancelWait <- struct{}{}:
		default:
		}
		return
	}
	if c.srv == nil || c.ls.outstanding == 0 {
		return
	}
	if err := c.srv.sendCancel(2 * time.Second); err != nil {
		c.log.Warn("cancel request failed: " + err.Error())
	}
}

// poolFor returns the pool of (db, user), creating it on first use. A
// forced user in the [databases] entry replaces the client's user.
func (s *Service) poolFor(db *config.Database, user string) (*Pool, error) {
	serverUser := user
	cred := auth.ServerCredentials{User: user}
	if db.User != "" {
		serverUser = db.User
		cred = auth.ServerCredentials{User: db.User, Password: db.Password}
	}
	if cred.Password == "" {
		if sec, ok := s.secret(serverUser); ok {
			cred.Secret = &sec
		}
	}
	key := poolKey{db: db.Name, user: serverUser}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.pools[key]; ok {
		return p, nil
	}
	p, err := newPool(s, key, db, cred)
	if err != nil {
		return nil, err
	}
	cfg := s.config()
	p.eff = cfg.Resolve(db, serverUser)
	p.dbLimit = s.limiterLocked(s.dbLimits, db.Name, p.eff.MaxDBConnections)
	p.userLimit = s.limiterLocked(s.userLimits, serverUser, p.eff.MaxUserConnections)
	p.dbLimit.add(p)
	p.userLimit.add(p)
	s.pools[key] = p
	return p, nil
}

func (s *Service) limiterLocked(m map[string]*limiter, name string, max int) *limiter {
	l, ok := m[name]
	if !ok {
		l = newLimiter(max)
		m[name] = l
	}
	l.mu.Lock()
	l.max = max
	l.mu.Unlock()
	return l
}

// evictFor closes an idle server of a sibling pool sharing a cap with p, so
// that p's waiters can get a server ("closing because: evicted").
func (s *Service) evictFor(p *Pool, l *limiter) {
	for _, sib := range l.members() {
		if sib != p && sib.closeIdleOne() {
			return
		}
	}
}

// wakeLimited lets pools blocked on a shared cap retry after a slot freed.
func (s *Service) wakeLimited(ls ...*limiter) {
	for _, l := range ls {
		for _, p := range l.members() {
			p.kick()
		}
	}
}

// janitor runs periodic pool maintenance.
func (s *Service) janitor(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.mu.Lock()
			pools := make([]*Pool, 0, len(s.pools))
			for _, p := range s.pools {
				pools = append(pools, p)
			}
			s.mu.Unlock()
			for _, p := range pools {
				p.maintain(now)
			}
		}
	}
}

// Close stops accepting clients and closes the listeners.
func (s *Service) Close() {
	s.shuttingDown.Store(true)
	s.mu.Lock()
	lns := s.listeners
	s.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
}

package pooler

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/config"
)

// Every time below is explicit: the buckets are driven through
// rate.Limiter's *At methods, never the wall clock.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestJitteredLifetime(t *testing.T) {
	base := 100 * time.Second
	for _, tc := range []struct {
		jitter, draw float64
		want         time.Duration
	}{
		{0.1, -1, 90 * time.Second},
		{0.1, 0, 100 * time.Second},
		{0.1, 0.5, 105 * time.Second},
		{0, -1, 100 * time.Second},
		{1, -1, 0},
	} {
		if got := jitteredLifetime(base, tc.jitter, tc.draw); got != tc.want {
			t.Errorf("jitteredLifetime(100s, %v, %v) = %v, want %v", tc.jitter, tc.draw, got, tc.want)
		}
	}
	lo, hi := 2.0, -2.0
	for i := 0; i < 10000; i++ {
		d := lifetimeDraw()
		if d < -1 || d >= 1 {
			t.Fatalf("lifetimeDraw() = %v, outside [-1, 1)", d)
		}
		lo, hi = min(lo, d), max(hi, d)
		if l := jitteredLifetime(base, 0.1, d); l < 90*time.Second || l > 110*time.Second {
			t.Fatalf("lifetime %v outside 100 s ± 10 %%", l)
		}
	}
	// The draws spread over the range (10,000 uniform draws all within
	// ±0.5 has probability 2^-10000).
	if lo > -0.5 || hi < 0.5 {
		t.Errorf("draws span [%v, %v], want a spread over [-1, 1)", lo, hi)
	}
}

// safeguardPool is a pool with a forced user and no sockets whose logins
// are recorded instead of started, and whose grow timer is inert (the test
// plays its ticks with explicit times).
func safeguardPool(t *testing.T, settings map[string]string) (*serverPool, *int) {
	t.Helper()
	cfg := config.Default()
	cfg.Settings.AuthType = "any"
	for k, v := range settings {
		if err := cfg.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	db := &config.Database{Name: "sg", Host: "127.0.0.1", Port: 5432, User: "forced", PoolSize: -1, MinPoolSize: -1, ReservePoolSize: -1, MaxDBConnections: -1, ServerLifetime: -1, QueryWaitTimeout: -1}
	p, err := svc.poolFor(db, "forced")
	if err != nil {
		t.Fatal(err)
	}
	launched := new(int)
	p.launch = func(*server) { *launched++ }
	p.growTimer = svc.clock.AfterFunc(time.Hour, func() {})
	p.growTimer.Stop()
	return p, launched
}

func TestMinPoolFillIsPaced(t *testing.T) {
	p, launched := safeguardPool(t, map[string]string{
		"server_connect_rate": "20", "server_connect_burst": "4", "server_max_parallel_connects": "3",
		"min_pool_size": "10", "default_pool_size": "20",
	})
	// Logins take 5 ms; one that ends frees its slot and grows again, as
	// connect does. The janitor's pass is played every millisecond.
	const login = 5 * time.Millisecond
	var at time.Duration
	var starts, inflight []time.Duration
	var logins []*server
	p.launch = func(s *server) {
		*launched++
		starts = append(starts, at)
		inflight = append(inflight, at)
		logins = append(logins, s)
	}
	maxParallel := 0
	p.mu.Lock()
	defer p.mu.Unlock()
	for at = 0; at <= time.Second; at += time.Millisecond {
		now := t0.Add(at)
		for len(inflight) > 0 && at-inflight[0] >= login {
			inflight = inflight[1:]
			p.setServerStateLocked(logins[0], serverIdle)
			logins = logins[1:]
			p.regrowLocked(now)
		}
		p.fillMinLocked(now)
		maxParallel = max(maxParallel, p.connecting)
	}
	if p.total != 10 || *launched != 10 {
		t.Fatalf("total %d, launched %d; want min_pool_size 10", p.total, *launched)
	}
	if maxParallel > 3 {
		t.Errorf("%d logins in flight, server_max_parallel_connects is 3", maxParallel)
	}
	// 3 at once (the in-flight cap), the burst's 4th token when the first
	// login ends, then one per 50 ms.
	want := []time.Duration{0, 0, 0, ms(5), ms(50), ms(100), ms(150), ms(200), ms(250), ms(300)}
	for i := range want {
		if starts[i] < want[i] || starts[i] > want[i]+ms(1) {
			t.Fatalf("login starts %v, want %v (±1ms)", starts, want)
		}
	}
	if !p.tokenWaitSince.IsZero() {
		t.Errorf("token wait still open after the pool reached min_pool_size")
	}
}

func TestGrowthForWaitersIsPaced(t *testing.T) {
	p, launched := safeguardPool(t, map[string]string{
		"server_connect_rate": "10", "server_connect_burst": "2", "server_max_parallel_connects": "0",
		"default_pool_size": "8",
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := 0; i < 8; i++ {
		w := &poolWaiter{grant: make(chan grant, 1)}
		p.queue.push(w)
	}
	p.growLocked(t0, false)
	if *launched != 2 {
		t.Fatalf("%d logins at t0, want the burst of 2", *launched)
	}
	if d := p.growAt.Sub(t0); d < ms(100) || d > ms(101) {
		t.Fatalf("grow timer armed for t0+%v, want t0+100ms (+1ms rounding)", d)
	}
	p.growLocked(t0.Add(ms(99)), false)
	if *launched != 2 {
		t.Fatalf("a token before its time: %d logins at t0+99ms", *launched)
	}
	p.growLocked(t0.Add(ms(100)), false)
	if *launched != 3 {
		t.Fatalf("%d logins at t0+100ms, want 3", *launched)
	}
	// Waiting never outgrows the pool: after 10 s, 8 logins (pool_size).
	p.growLocked(t0.Add(10*time.Second), false)
	if *launched != 5 || p.total != 5 {
		t.Fatalf("launched %d total %d at t0+10s; the bucket holds at most 2, want 5", *launched, p.total)
	}
	for at := 10 * time.Second; at <= 11*time.Second; at += ms(100) {
		p.growLocked(t0.Add(at), false)
	}
	if *launched != 8 || p.total != 8 {
		t.Fatalf("launched %d total %d, want pool_size 8", *launched, p.total)
	}
	if p.metrics.connectWait.Get() <= 0 {
		t.Errorf("pgturnstile_server_connect_wait_seconds_total = %v after waiting for tokens", p.metrics.connectWait.Get())
	}
}

func TestCloseBucket(t *testing.T) {
	p, _ := safeguardPool(t, map[string]string{"server_close_rate": "10"})
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := 0; i < 10; i++ {
		if !p.mayCloseLocked("server idle timeout", t0) {
			t.Fatalf("close %d of the burst of 10 refused", i)
		}
	}
	if p.mayCloseLocked("server lifetime over", t0) {
		t.Fatal("an 11th healthy close at t0 was allowed")
	}
	// Emergencies and PAUSE never wait.
	if !p.mayCloseLocked(reasonCrashed, t0) || !p.mayCloseLocked(reasonPause, t0) {
		t.Fatal("an emergency close waited for a token")
	}
	if p.mayCloseLocked("limit lowered", t0.Add(ms(99))) || !p.mayCloseLocked("limit lowered", t0.Add(ms(100))) {
		t.Fatal("the next close token must come 100 ms later")
	}
}

func TestLifetimeJitterOnClose(t *testing.T) {
	p, _ := safeguardPool(t, map[string]string{"server_lifetime": "100", "server_lifetime_jitter": "0.1", "server_idle_timeout": "0"})
	st := p.svc.settings()
	p.mu.Lock()
	defer p.mu.Unlock()
	early, late := p.newLoginLocked(), p.newLoginLocked() // total 2
	early.created, early.lastUsed, early.lifeDraw = t0, t0, -1
	late.created, late.lastUsed, late.lifeDraw = t0, t0, 0.5
	for _, tc := range []struct {
		s    *server
		at   time.Duration
		want string
	}{
		{early, 89 * time.Second, ""},
		{early, 91 * time.Second, "server lifetime over"},
		{late, 104 * time.Second, ""},
		{late, 106 * time.Second, "server lifetime over"},
	} {
		if got := p.closeReasonLocked(tc.s, st, t0.Add(tc.at), true, 0); got != tc.want {
			t.Errorf("draw %v at %v: reason %q, want %q", tc.s.lifeDraw, tc.at, got, tc.want)
		}
	}
}

func TestSafeguardSettingsDefaults(t *testing.T) {
	st := config.Default().Settings
	if st.ServerConnectRate != 20 || st.ServerConnectBurst != 4 || st.ServerMaxParallelConnects != 4 ||
		st.ServerCloseRate != 10 || st.ServerLifetimeJitter != 0.1 || st.ClientDrainMaxBytes != 1<<20 {
		t.Fatalf("defaults: %+v", st)
	}
	c := config.Default()
	for _, bad := range []string{"-0.1", "1.5", "NaN", "x"} {
		if err := c.Set("server_lifetime_jitter", bad); err == nil {
			t.Errorf("server_lifetime_jitter = %s accepted", bad)
		}
	}
	if err := c.Set("server_connect_burst", "0"); err == nil || !strings.Contains(err.Error(), "between 1") {
		t.Errorf("server_connect_burst = 0: %v, want a range error", err)
	}
	if err := c.Set("server_lifetime_jitter", "0.25"); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Value("server_lifetime_jitter"); v != "0.25" || c.Settings.ServerLifetimeJitter != 0.25 {
		t.Errorf("server_lifetime_jitter reads back %q / %v", v, c.Settings.ServerLifetimeJitter)
	}
}

package pooler

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/config"
)

// benchPool is a pool of n idle servers without sockets: enough for
// checkout and release, which never touch the connection.
func benchPool(tb testing.TB, n int) *serverPool {
	tb.Helper()
	cfg := config.Default()
	cfg.Settings.AuthType = "any"
	svc, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	db := &config.Database{Name: "bench", Host: "127.0.0.1", Port: 5432, PoolSize: -1, MinPoolSize: -1, ReservePoolSize: -1, MaxDBConnections: -1, ServerLifetime: -1, QueryWaitTimeout: -1}
	p, err := svc.poolFor(db, "bench")
	if err != nil {
		tb.Fatal(err)
	}
	p.mu.Lock()
	p.eff.PoolSize = n
	for i := 0; i < n; i++ {
		s := p.newLoginLocked()
		s.id, s.created, s.lastUsed = uint64(i+1), time.Now(), time.Now()
		p.setServerStateLocked(s, serverIdle)
	}
	p.mu.Unlock()
	return p
}

// BenchmarkCheckoutRelease measures one server checkout and release from a
// pool with an idle server for every goroutine: the uncontended path of a
// transaction. Run with -cpu 1,2,4,8.
func BenchmarkCheckoutRelease(b *testing.B) {
	p := benchPool(b, 64)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s, err := p.acquire(nil, nil)
			if err != nil {
				b.Error(err)
				return
			}
			p.release(s)
		}
	})
}

func TestCheckoutReleaseDoesNotAllocate(t *testing.T) {
	p := benchPool(t, 2)
	n := testing.AllocsPerRun(200, func() {
		s, err := p.acquire(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		p.release(s)
	})
	if n != 0 {
		t.Fatalf("checkout+release allocates %v times", n)
	}
}

// hasWaiters, read without the pool's lock, follows the queue: a client
// waiting for the only server, handed it by release, and one that gives up.
func TestHasWaitersFollowsTheQueue(t *testing.T) {
	p := benchPool(t, 1)
	s, err := p.acquire(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.hasWaiters() {
		t.Fatal("hasWaiters with nobody waiting")
	}
	waitFor := func(want bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); p.hasWaiters() != want; {
			if time.Now().After(deadline) {
				t.Fatalf("hasWaiters stayed %v", !want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	got := make(chan *server, 1)
	go func() {
		s2, err := p.acquire(nil, nil)
		if err != nil {
			t.Error(err)
		}
		got <- s2
	}()
	waitFor(true)
	p.release(s) // handed to the waiter
	if p.hasWaiters() {
		t.Fatal("hasWaiters after release handed the server to the only waiter")
	}
	s = <-got
	if s == nil {
		t.Fatal("the waiter got no server")
	}

	cancel := make(chan struct{})
	gaveUp := make(chan error, 1)
	go func() {
		_, err := p.acquire(cancel, nil)
		gaveUp <- err
	}()
	waitFor(true)
	close(cancel)
	if err := <-gaveUp; err != errWaitCanceled {
		t.Fatalf("cancelled wait: %v, want errWaitCanceled", err)
	}
	if p.hasWaiters() {
		t.Fatal("hasWaiters after the only waiter gave up")
	}
	p.release(s)
}

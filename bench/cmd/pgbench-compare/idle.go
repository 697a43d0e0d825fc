//go:build linux

package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgturnstile/pgturnstile/bench/internal/benchenv"
)

// idleResult is one idle-connections measurement of one fresh pooler.
type idleResult struct {
	Target    string
	Round     int
	OK        bool
	Err       string
	Clients   int
	BeforeKB  int64   // VmRSS with one client logged in and its query done
	WithKB    int64   // VmRSS with Clients more logged in and idle
	PerClient float64 // (WithKB-BeforeKB)/Clients, KiB
	ConnectS  float64 // time to log all of them in (SCRAM each)
	// AnonPerClient and FilePerClient split PerClient into the growth of
	// RssAnon (heap, stacks: what the clients cost) and of RssFile (the
	// executable's pages first run while the clients logged in, which a
	// larger binary has more of and which no client holds).
	AnonPerClient, FilePerClient float64
}

// measureIdle logs n clients in to p (SCRAM, like pgbench), leaves them idle
// and reads the pooler's RSS before and with them.
// With heapTo set, the heap profile from pprofAddr is saved there while the
// clients are connected.
func measureIdle(ctx context.Context, p *benchenv.Proc, n int, round int, pprofAddr, heapTo string) idleResult {
	r := idleResult{Target: p.Name, Round: round, Clients: n}
	// One client and one query first: the pool has its server connection and
	// the process its steady baseline.
	if err := queryOnce(ctx, p.Port, plainLogin); err != nil {
		r.Err = "warm-up query: " + err.Error()
		return r
	}
	time.Sleep(500 * time.Millisecond)
	before, err := benchenv.StatusKB(p.Pid(), "VmRSS")
	if err != nil {
		r.Err = err.Error()
		return r
	}
	r.BeforeKB = before
	anonBefore, _ := benchenv.StatusKB(p.Pid(), "RssAnon")
	fileBefore, _ := benchenv.StatusKB(p.Pid(), "RssFile")
	if heapTo != "" {
		if err := saveURL("http://"+pprofAddr+"/debug/pprof/heap?debug=1", heapTo+".before"); err != nil {
			r.Err = "idle heap profile: " + err.Error()
			return r
		}
	}

	conns := make([]*pgconn.PgConn, n)
	var next atomic.Int64
	var firstErr atomic.Value
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				c, err := pgconn.Connect(cctx, connString(p.Port))
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	r.ConnectS = time.Since(start).Seconds()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close(context.Background())
			}
		}
	}()
	if f := failed.Load(); f > 0 {
		r.Err = fmt.Sprintf("%d of %d logins failed; first: %v", f, n, firstErr.Load())
		return r
	}
	// Let the pooler settle: pgturnstile parks a client idle for 1 s at
	// its next once-a-second scan.
	time.Sleep(3 * time.Second)
	with, err := benchenv.StatusKB(p.Pid(), "VmRSS")
	if err != nil {
		r.Err = err.Error()
		return r
	}
	anonWith, _ := benchenv.StatusKB(p.Pid(), "RssAnon")
	fileWith, _ := benchenv.StatusKB(p.Pid(), "RssFile")
	r.AnonPerClient = float64(anonWith-anonBefore) / float64(n)
	r.FilePerClient = float64(fileWith-fileBefore) / float64(n)
	// Every connection still usable? A pooler that dropped idle clients
	// would look cheap.
	if err := conns[n-1].Exec(cctx, "SELECT 1").Close(); err != nil {
		r.Err = "query on the last idle connection: " + err.Error()
		return r
	}
	if heapTo != "" {
		if err := saveURL("http://"+pprofAddr+"/debug/pprof/heap?debug=1", heapTo); err != nil {
			r.Err = "idle heap profile: " + err.Error()
			return r
		}
	}
	r.WithKB = with
	r.PerClient = float64(with-before) / float64(n)
	r.OK = true
	return r
}

// saveURL writes the body of a GET of url to the file path.
func saveURL(url, path string) error { return fetchTo(context.Background(), url, path, 0) }

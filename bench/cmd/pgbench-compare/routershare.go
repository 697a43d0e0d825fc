//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// The router's share of the pooler's CPU (-router-profile), issue 34's
// cost criterion measured another way. On a shared 2-core machine the
// pair ratio of CPU per transaction moves by ±30 % between rounds (the A/A
// noise floor), so a 3 % cost cannot be told from it. A CPU profile of the
// map instance taken during the same runs can: the share of its samples
// whose stack passes through the router (the shard package and the
// pooler's glue that calls it) is what the router costs, and a map costing
// share s implies a CPU ratio of 1/(1−s) against the same instance without
// it. Profiling costs the profiled instance a little CPU, so the report
// says so beside that run's ratios.

// routerFocus names the router's functions: package shard, and the
// pooler's shard glue (link.shard*, link.batch*, shardSession); package
// shard's prefix covers its subpackages (shard/session).
const routerFocus = `pgturnstile/pgturnstile/shard[./]|pooler\.\(\*link\)\.(shard|batch)|pooler\.\(\*shardSession\)`

// routerShares collects, per workload, the profiles of its map instance
// and, once the workload's rounds are over, the share read from them.
type routerShares struct {
	dir string
	mu  sync.Mutex
	// files are the profiles per workload key; result is the report's
	// line per workload key.
	files  map[string][]string
	result map[string]string
}

func newRouterShares(dir string) *routerShares {
	return &routerShares{dir: dir, files: map[string][]string{}, result: map[string]string{}}
}

// during profiles the instance serving pprof at addr while a run of d
// lasts, from a second after it starts to a second before it ends; wait
// returns when the profile is saved (or failed, which is logged).
func (rs *routerShares) during(ctx context.Context, addr, key string, seq int, d time.Duration, logf func(string, ...any)) (wait func()) {
	secs := int(d.Seconds()) - 2
	if secs < 1 {
		secs = 1
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		path := filepath.Join(rs.dir, fmt.Sprintf("router%04d.pb.gz", seq))
		if err := fetchTo(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs), path, time.Duration(secs+30)*time.Second); err != nil {
			logf("router profile of %s (run %d): %v", key, seq, err)
			return
		}
		rs.mu.Lock()
		rs.files[key] = append(rs.files[key], path)
		rs.mu.Unlock()
	}()
	return func() { <-done }
}

// fetchTo writes the body of a GET of url to the file path, giving up
// after timeout (0: none).
func fetchTo(ctx context.Context, url, path string, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// settle reads the share of key's profiles, all rounds merged, with `go
// tool pprof` (the toolchain `make bench` built with), into the report's
// line for the workload.
func (rs *routerShares) settle(key, binary string, logf func(string, ...any)) {
	rs.mu.Lock()
	files := rs.files[key]
	rs.mu.Unlock()
	if len(files) == 0 {
		rs.result[key] = "no profile"
		return
	}
	share, total, err := routerShare(binary, files)
	if err != nil {
		logf("router share of %s: %v", key, err)
		rs.result[key] = "n/a: " + shorten(err.Error(), 120)
		return
	}
	rs.result[key] = fmt.Sprintf("%.2f %% of %s of samples over %d runs: implied CPU ratio %.3f", share*100, total, len(files), 1/(1-share))
	logf("router share of %s: %s", key, rs.result[key])
}

// pprofTotals is pprof's "accounting for 0.51s, 3.07% of 11.40s total".
var pprofTotals = regexp.MustCompile(`accounting for [0-9.]+[a-zµ]*s, ([0-9.]+)% of ([0-9.]+[a-zµ]*s) total`)

// routerShare runs `go tool pprof -top -focus=routerFocus` over the
// profiles and returns the focused share of all samples.
func routerShare(binary string, files []string) (share float64, total string, err error) {
	goBin := "go"
	if p, err := exec.LookPath("go"); err == nil {
		goBin = p
	} else if _, err := os.Stat("/usr/local/go/bin/go"); err == nil {
		goBin = "/usr/local/go/bin/go"
	}
	args := append([]string{"tool", "pprof", "-top", "-focus=" + routerFocus, binary}, files...)
	out, err := exec.Command(goBin, args...).CombinedOutput()
	if err != nil {
		return 0, "", fmt.Errorf("go tool pprof: %v: %s", err, shorten(string(out), 200))
	}
	m := pprofTotals.FindSubmatch(out)
	if m == nil {
		// No sample passed through the router: pprof says so differently.
		return 0, "", fmt.Errorf("go tool pprof printed no totals: %s", shorten(string(out), 200))
	}
	pct, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return 0, "", err
	}
	return pct / 100, string(m[2]), nil
}

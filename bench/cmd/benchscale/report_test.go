//go:build linux

package main

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCoreCounts(t *testing.T) {
	for n, want := range map[int][]int{1: {1}, 2: {1, 2}, 6: {1, 2, 4, 6}, 16: {1, 2, 4, 8, 16}} {
		if got := coreCounts(n); !slices.Equal(got, want) {
			t.Errorf("coreCounts(%d) = %v, want %v", n, got, want)
		}
	}
	if got := cpuList([]int{0, 1, 2, 5, 7, 8}); got != "0-2,5,7-8" {
		t.Errorf("cpuList = %q", got)
	}
}

func TestLoginAllowance(t *testing.T) {
	if d := loginAllowance(workload{Clients: 40, Args: []string{"-S", "-C"}}, 2, []int{1}); d != 0 {
		t.Errorf("-C: %v", d)
	}
	// 10,000 clients, two pgbench threads on two CPUs: 50 s + 1 s.
	if d := loginAllowance(workload{Clients: 10000, Args: []string{"-S"}}, 2, []int{0, 1}); d != 51*time.Second {
		t.Errorf("10,000 clients: %v", d)
	}
}

// TestReport: medians, pair-by-pair ratios, N = 1 without ×N, the
// informational scale check below 16 cores and the judged one at 16.
func TestReport(t *testing.T) {
	var rs []result
	add := func(cores, round int, tgt string, tps, cpu float64) {
		rs = append(rs, result{Cores: cores, Workload: "S-120", Target: tgt, Round: round, OK: true, TPS: tps, CPUus: cpu})
	}
	add(1, 1, tTurn, 100, 40)
	add(1, 1, tBouncer, 50, 30)
	add(1, 2, tTurn, 300, 40)
	add(1, 2, tBouncer, 100, 20)
	add(16, 1, tTurn, 1000, 40)
	add(16, 1, tBouncer, 200, 30)
	add(16, 1, tBouncerN, 800, 35)
	rs = append(rs, result{Cores: 16, Workload: "S-120", Target: tBouncerN, Round: 2, Err: "boom", CPUus: math.NaN()})
	ws := []workload{{Key: "S-120", Name: "`-S`, 120 clients", Clients: 120}}
	o := options{rounds: 2, duration: 6 * time.Second, scale: 10}
	in := info{Machine: "Test CPU, 16 cores", CPUs: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}}
	out := report(o, in, ws, rs)
	for _, want := range []string{
		"### Test CPU, 16 cores",
		"| S-120 | 1 | 200 | 75 | (= ×1) | 2.50 | (= ÷ ×1) |", // ratios 2 and 3: median 2.5
		"| S-120 | 16 | 1000 | 200 | 800 | 5.00 | 1.25 |",
		"| S-120 | 1 | 40.0 | 25.0 | (= ×1) | 1.67 | (= ÷ ×1) |",
		"on `S-120`: 5.00 (≥ 4 needed): **met**",
		"16 cores, `S-120`, round 2, pgbouncer×N: boom",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	in.Machine, in.CPUs = "Small, 2 cores", []int{0, 1}
	rs = slices.DeleteFunc(rs, func(r result) bool { return r.Cores == 16 })
	if out := report(o, in, ws, rs); !strings.Contains(out, "informational") {
		t.Errorf("2-core report judges the 16-core check:\n%s", out)
	}
}

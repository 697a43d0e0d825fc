package admission_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"github.com/pgturnstile/pgturnstile/admission"
	"github.com/pgturnstile/pgturnstile/admission/fakeclock"
)

// BenchmarkGateUncontended: Acquire + Release with free capacity and the
// system clock; 0 allocs/op.
func BenchmarkGateUncontended(b *testing.B) {
	g := admission.NewGate(admission.Config{}, 100)
	ctx := context.Background()
	c := admission.Class{Priority: 1}
	b.ReportAllocs()
	for b.Loop() {
		tk, err := g.Acquire(ctx, c)
		if err != nil {
			b.Fatal(err)
		}
		g.Release(tk)
	}
}

// BenchmarkGateContended: 4 goroutines per P acquire and release over 4
// tiers with capacity GOMAXPROCS, so most requests queue and are woken by
// releases. Debt is off: with it, lower tiers of so small a pool would
// legitimately wait seconds for decay, which measures the policy, not the
// gate.
func BenchmarkGateContended(b *testing.B) {
	procs := runtime.GOMAXPROCS(0)
	g := admission.NewGate(admission.Config{Short: 1e9, Long: 1e10, NoDebt: true}, procs)
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		i := 0
		for pb.Next() {
			i++
			tk, err := g.Acquire(ctx, admission.Class{Priority: i % 4})
			if err != nil {
				continue
			}
			g.Release(tk)
		}
	})
}

// BenchmarkGateDispatch1000Waiters: 1,000 requests queued over a 32-leaf
// two-level tree and 4 tiers; each op releases one ticket, which dispatches
// the next waiter, and queues a replacement (cost per release+dispatch).
func BenchmarkGateDispatch1000Waiters(b *testing.B) {
	spec := admission.TreeSpec{Levels: []string{"auth", "endpoint"}}
	for i := 0; i < 4; i++ {
		for j := 0; j < 7; j++ {
			spec.Nodes = append(spec.Nodes, admission.NodeSpec{Path: []string{"a" + strconv.Itoa(i), "e" + strconv.Itoa(j)}, Weight: float64(1 + j%3)})
		}
	}
	tr, err := admission.NewTree(spec)
	if err != nil {
		b.Fatal(err)
	}
	clk := fakeclock.New(t0) // frozen: nothing times out
	g := admission.NewGate(admission.Config{Tree: tr, PoolSize: 1000, NoDebt: true, Clock: clk}, 10)
	var held []admission.Ticket
	done := func(tk admission.Ticket, err error) {
		if err == nil {
			held = append(held, tk)
		}
	}
	n := 0
	class := func() admission.Class {
		n++
		return admission.Class{Priority: n % 4, Leaf: admission.LeafID(n % tr.Leaves())}
	}
	for i := 0; i < 10; i++ {
		g.Submit(class(), done)
	}
	for i := 0; i < 1000; i++ {
		g.Submit(class(), done)
	}
	if g.Waiting() != 1000 || len(held) != 10 {
		b.Fatalf("waiting %d held %d", g.Waiting(), len(held))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tk := held[0]
		held = held[1:]
		g.Release(tk)
		g.Submit(class(), done)
	}
}

package admission_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/admission"
	"github.com/pgturnstile/pgturnstile/admission/fakeclock"
)

func TestGateSmoke(t *testing.T) {
	clk := fakeclock.New(time.Unix(0, 0))
	g := admission.NewGate(admission.Config{Clock: clk}, 1)
	tk, err := g.Acquire(context.Background(), admission.Class{})
	if err != nil || !tk.Valid() {
		t.Fatal(err)
	}
	var got error = nil
	calls := 0
	r := g.Submit(admission.Class{Priority: 1}, func(tk admission.Ticket, err error) {
		calls++
		got = err
		if err == nil {
			g.Release(tk)
		}
	})
	if r == nil || g.Waiting() != 1 {
		t.Fatal("should queue")
	}
	g.Release(tk)
	if calls != 1 || got != nil || g.InUse() != 0 {
		t.Fatalf("calls %d err %v inUse %d", calls, got, g.InUse())
	}
	if err := g.CheckInvariants(0); err != nil {
		t.Fatal(err)
	}
}

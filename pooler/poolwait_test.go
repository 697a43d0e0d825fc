package pooler

import (
	"errors"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/pgerror"
)

// waitQueued waits until p's queue holds n waiters.
func waitQueued(t *testing.T, p *serverPool, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		p.mu.Lock()
		got := p.queue.len()
		p.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue holds %d waiters, want %d", got, n)
		}
	}
}

// startWait begins wait number w.seq+1 of a reused waiter, as link does,
// and returns where its outcome will arrive.
func startWait(p *serverPool, w *poolWaiter) (seq uint64, done chan error) {
	seq = w.seq.Add(1)
	done = make(chan error, 1)
	go func() {
		s, err := p.acquire(nil, w)
		if s != nil {
			p.release(s)
		}
		done <- err
	}()
	return seq, done
}

// A cancel request ends the wait it was aimed at, and only that one: not a
// later wait of the same client that reuses the waiter, and not a wait that
// has already been granted its server.
func TestCancelWaiterEndsOnlyItsOwnWait(t *testing.T) {
	p := benchPool(t, 1)
	held, err := p.acquire(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &poolWaiter{}

	first, done := startWait(p, w)
	waitQueued(t, p, 1)
	p.cancelWaiter(w, first-1) // an earlier wait's cancel
	select {
	case err := <-done:
		t.Fatalf("a stale cancel ended the wait: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	p.cancelWaiter(w, first)
	if err := <-done; !errors.Is(err, errWaitCanceled) {
		t.Fatalf("cancelled wait ended with %v, want errWaitCanceled", err)
	}
	if p.hasWaiters() {
		t.Fatal("the cancelled waiter is still counted as queued")
	}

	// Granted, then the cancel arrives: the server stays with the client.
	second, done := startWait(p, w)
	waitQueued(t, p, 1)
	p.release(held)
	if err := <-done; err != nil {
		t.Fatalf("granted wait: %v", err)
	}
	p.cancelWaiter(w, second)
	held, err = p.acquire(nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	// The next wait ignores the second wait's late cancel.
	_, done = startWait(p, w)
	waitQueued(t, p, 1)
	p.cancelWaiter(w, second)
	select {
	case err := <-done:
		t.Fatalf("an earlier wait's cancel ended the next one: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	p.release(held)
	if err := <-done; err != nil {
		t.Fatalf("third wait: %v", err)
	}
}

// The janitor's pass ends the waits older than query_wait_timeout with
// PgBouncer's query_wait_timeout error and leaves the younger ones queued.
func TestMaintainExpiresOldWaiters(t *testing.T) {
	p := benchPool(t, 1)
	held, err := p.acquire(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	timeout := p.svc.settings().QueryWaitTimeout
	if timeout <= 0 {
		t.Fatalf("default query_wait_timeout is %v", timeout)
	}
	old, young := &poolWaiter{}, &poolWaiter{}
	_, oldDone := startWait(p, old)
	waitQueued(t, p, 1)
	time.Sleep(10 * time.Millisecond)
	_, youngDone := startWait(p, young)
	waitQueued(t, p, 2)

	p.mu.Lock()
	enqueued := old.enqueued
	p.mu.Unlock()
	p.maintain(enqueued.Add(timeout + 5*time.Millisecond))
	err = <-oldDone
	var pe *pgerror.Error
	if !errors.As(err, &pe) || pe.Code != pgerror.QueryWaitTimeout || pe.SQLState != "08P01" {
		t.Fatalf("expired wait ended with %v, want 08P01 query_wait_timeout", err)
	}
	waitQueued(t, p, 1)
	if !p.hasWaiters() {
		t.Fatal("the younger waiter is not counted as queued")
	}
	p.release(held)
	if err := <-youngDone; err != nil {
		t.Fatalf("younger wait: %v", err)
	}
}

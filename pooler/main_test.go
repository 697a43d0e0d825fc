package pooler

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine is still running
// after them: a pooler goroutine that outlives its client, server or
// Service (a pump, a drain, a login, a timer's callback) is a leak in
// production too. goleak retries for a while before it reports, so
// goroutines that are ending when the last test returns are not counted.
// The one exception is netpoll's poller, started with the first
// connection accepted and kept for the life of the process by design.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/pgturnstile/pgturnstile/internal/netpoll.(*poller).run"))
}

package pooler

import (
	"errors"
	"fmt"
	"testing"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/wire"
)

// failsWaiters: a login a restarting Postgres turns away (starting up,
// shutting down, or the backend ended mid-login by the shutdown) leaves
// the waiters queued for the retry, and gives new clients of a pool that
// has served no cached error; a real refusal fails them. TestPostgresRestart
// once saw "terminating connection due to administrator command" (57P01)
// cached as a login failure for every reconnecting client.
func TestFailsWaitersServerGoingAway(t *testing.T) {
	fatal := func(code, msg string) error {
		return fmt.Errorf("login: %w", &auth.ServerError{Fields: wire.ErrorFields{Severity: "FATAL", Code: code, Message: msg}})
	}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fatal("57P03", "the database system is starting up"), false},
		{fatal("57P03", "the database system is shutting down"), false},
		{fatal("57P01", "terminating connection due to administrator command"), false},
		{fatal("57P02", "terminating connection because of crash of another server process"), false},
		{fatal("28P01", `password authentication failed for user "app"`), true},
		{fatal("3D000", `database "x" does not exist`), true},
		{errors.New("some other failure"), true},
	} {
		if got := failsWaiters(tc.err); got != tc.want {
			t.Errorf("failsWaiters(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
}

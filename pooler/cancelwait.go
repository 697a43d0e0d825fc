package pooler

import (
	"time"

	"github.com/pgturnstile/pgturnstile/config"
)

// cancelWait is how long a cancel request may take to reach Postgres:
// cancel_wait_timeout, or server_connect_timeout when that is 0 (PgBouncer
// then waits forever; here the server the cancel is for waits in
// being_canceled meanwhile, so the wait stays bounded), or 2 s when both
// are 0.
func cancelWait(st *config.Settings) time.Duration {
	switch {
	case st.CancelWaitTimeout > 0:
		return st.CancelWaitTimeout
	case st.ServerConnectTimeout > 0:
		return st.ServerConnectTimeout
	}
	return 2 * time.Second
}

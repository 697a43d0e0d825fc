package pooler

import "github.com/pgturnstile/pgturnstile/internal/connlimit"

// limiter caps server connections shared by several pools
// (max_db_connections, max_user_connections; internal/connlimit), its
// members the pools that take from it.
type limiter = connlimit.Limiter[*serverPool]

// limiterDeferred is deferredLocked over every pool under the cap l, while
// it is over. Called without any pool's mu.
func limiterDeferred(l *limiter) int {
	if l.Over() == 0 {
		return 0
	}
	n := 0
	for _, m := range l.Members() {
		m.mu.Lock()
		n += m.deferredLocked()
		m.mu.Unlock()
	}
	return n
}

// Package connlimit is a cap on connections that several pools share
// (max_db_connections, max_user_connections): a count under a maximum,
// and the pools that take from it, so that a pool at the cap can find a
// sibling to evict from or wake when a slot frees.
package connlimit

import "sync"

// Limiter counts the connections its members hold against max; 0 is
// unlimited. M is a member (the pooler's pool); its methods take the
// Limiter's own lock only, a leaf under any lock of the caller's.
type Limiter[M comparable] struct {
	mu      sync.Mutex
	max     int
	n       int
	members map[M]struct{}
}

// New is a Limiter of max with no members.
func New[M comparable](max int) *Limiter[M] {
	return &Limiter[M]{max: max, members: map[M]struct{}{}}
}

// TryTake counts one more connection, unless that would pass the cap.
func (l *Limiter[M]) TryTake() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max > 0 && l.n >= l.max {
		return false
	}
	l.n++
	return true
}

// Give counts one connection fewer.
func (l *Limiter[M]) Give() {
	l.mu.Lock()
	l.n--
	l.mu.Unlock()
}

// SetMax changes the cap (RELOAD, SET); connections already counted stay,
// and Over tells how many are past a lowered cap.
func (l *Limiter[M]) SetMax(max int) {
	l.mu.Lock()
	l.max = max
	l.mu.Unlock()
}

// Count is the connections counted now (SHOW DATABASES' and SHOW USERS'
// current_connections).
func (l *Limiter[M]) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// Over reports how many connections exceed the cap.
func (l *Limiter[M]) Over() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max <= 0 || l.n <= l.max {
		return 0
	}
	return l.n - l.max
}

// Add makes m a member.
func (l *Limiter[M]) Add(m M) {
	l.mu.Lock()
	l.members[m] = struct{}{}
	l.mu.Unlock()
}

// Drop takes m out of the members and reports whether the Limiter is now
// unused: no member and no connection counted, so that its owner may
// forget it.
func (l *Limiter[M]) Drop(m M) (unused bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.members, m)
	return len(l.members) == 0 && l.n == 0
}

// Members lists the members, in no order.
func (l *Limiter[M]) Members() []M {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]M, 0, len(l.members))
	for m := range l.members {
		out = append(out, m)
	}
	return out
}

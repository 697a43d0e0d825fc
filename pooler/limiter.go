package pooler

import (
	"sync"
)

// limiter caps server connections shared by several pools
// (max_db_connections, max_user_connections). 0 = unlimited.
type limiter struct {
	mu    sync.Mutex
	max   int
	n     int
	pools map[*serverPool]struct{}
}

func newLimiter(max int) *limiter { return &limiter{max: max, pools: map[*serverPool]struct{}{}} }

func (l *limiter) tryTake() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max > 0 && l.n >= l.max {
		return false
	}
	l.n++
	return true
}

func (l *limiter) setMax(max int) {
	l.mu.Lock()
	l.max = max
	l.mu.Unlock()
}

// over reports how many connections exceed the cap.
func (l *limiter) over() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max <= 0 || l.n <= l.max {
		return 0
	}
	return l.n - l.max
}

func (l *limiter) give() {
	l.mu.Lock()
	l.n--
	l.mu.Unlock()
}

func (l *limiter) add(p *serverPool) {
	l.mu.Lock()
	l.pools[p] = struct{}{}
	l.mu.Unlock()
}

func (l *limiter) members() []*serverPool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*serverPool, 0, len(l.pools))
	for p := range l.pools {
		out = append(out, p)
	}
	return out
}

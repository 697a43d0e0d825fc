package wire

import (
	"errors"
	"sync/atomic"
)

// ErrBudgetExceeded is returned by ReadBody when the body of a message
// larger than the read buffer would take the Budget past its limit. The
// message stays current and unread: the caller may Skip it, but the pooler
// answers with an out-of-memory error and closes the client instead.
var ErrBudgetExceeded = errors.New("wire: message body memory budget exceeded")

// Budget bounds the memory held, across all the readers sharing it, in
// message bodies that ReadBody copies out because they do not fit a read
// buffer. Read buffers themselves are not counted: they are bounded per
// connection. The length field is the peer's word, so ReadBody reserves a
// body's length here before it allocates for it, and a client cannot make
// the pooler commit gigabytes with a five-byte header; the total stays
// under the limit whatever the clients claim.
//
// A reservation lasts until its message is done with: the reader's next
// Next, DropBuffer or Release. Accounting is atomic; a Budget is shared by
// any number of readers on any goroutines. A nil *Budget is no budget.
type Budget struct {
	limit atomic.Int64
	inUse atomic.Int64
}

// NewBudget returns a Budget of limit bytes; limit <= 0 means no limit
// (InUse still counts).
func NewBudget(limit int64) *Budget {
	b := &Budget{}
	b.limit.Store(limit)
	return b
}

// Limit returns the current limit.
func (b *Budget) Limit() int64 { return b.limit.Load() }

// SetLimit changes the limit (a RELOAD). Reservations already held stay;
// a lower limit applies to the next ones.
func (b *Budget) SetLimit(limit int64) { b.limit.Store(limit) }

// InUse returns the bytes reserved now.
func (b *Budget) InUse() int64 { return b.inUse.Load() }

// reserve takes n bytes from the budget, or reports false and takes nothing
// when that would pass the limit.
func (b *Budget) reserve(n int64) bool {
	limit := b.limit.Load()
	if limit <= 0 {
		b.inUse.Add(n)
		return true
	}
	for {
		cur := b.inUse.Load()
		if n > limit-cur {
			return false
		}
		if b.inUse.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// release gives back n bytes taken by reserve.
func (b *Budget) release(n int64) {
	if b.inUse.Add(-n) < 0 {
		panic("wire: BUG: budget released more than was reserved")
	}
}

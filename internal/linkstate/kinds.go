package linkstate

import "github.com/pgturnstile/pgturnstile/wire"

// kinds is a FIFO of message kinds. It grows to the longest pipeline seen
// and keeps its buffer, so a link in steady state does not allocate.
// Entries set to 0 are removed by compact.
type kinds struct {
	buf  []byte
	head int
}

func (q *kinds) len() int          { return len(q.buf) - q.head }
func (q *kinds) at(i int) byte     { return q.buf[q.head+i] }
func (q *kinds) set(i int, k byte) { q.buf[q.head+i] = k }

func (q *kinds) push(k byte) {
	if k == wire.MsgCopyData && q.len() > 0 && q.buf[len(q.buf)-1] == k {
		return // one entry per run of CopyData: only the run's place matters
	}
	if q.head > 0 && len(q.buf) == cap(q.buf) {
		n := copy(q.buf, q.buf[q.head:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, k)
}

func (q *kinds) pop() byte {
	k := q.buf[q.head]
	q.head++
	if q.head == len(q.buf) {
		q.clear()
	}
	return k
}

func (q *kinds) dropFirst(n int) {
	q.head += n
	if q.head == len(q.buf) {
		q.clear()
	}
}

func (q *kinds) dropLast() {
	if q.len() > 0 {
		q.buf = q.buf[:len(q.buf)-1]
	}
}

func (q *kinds) clear() { q.buf, q.head = q.buf[:0], 0 }

// compact removes the entries set to 0.
func (q *kinds) compact() {
	out := q.buf[:0]
	for _, k := range q.buf[q.head:] {
		if k != 0 {
			out = append(out, k)
		}
	}
	q.buf, q.head = out, 0
}

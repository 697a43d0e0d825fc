// Package ring is a FIFO queue on a ring buffer that grows but never
// shrinks, so that a queue in steady use does not allocate: the replies a
// pooler's link still owes its client, pushed as messages go to a server
// and popped as the server answers.
package ring

// Queue is a FIFO of T. The zero Queue is empty and ready to use.
type Queue[T any] struct {
	buf        []T
	head, size int
}

// Push adds v at the tail.
func (q *Queue[T]) Push(v T) {
	if q.size == len(q.buf) {
		nb := make([]T, max(8, 2*len(q.buf)))
		for i := 0; i < q.size; i++ {
			nb[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = nb, 0
	}
	q.buf[(q.head+q.size)%len(q.buf)] = v
	q.size++
}

// Len is how many entries the queue holds.
func (q *Queue[T]) Len() int { return q.size }

// At is the i-th entry from the head, in place; 0 ≤ i < Len.
func (q *Queue[T]) At(i int) *T { return &q.buf[(q.head+i)%len(q.buf)] }

// Tail is the entry pushed last; the queue must not be empty.
func (q *Queue[T]) Tail() *T { return q.At(q.size - 1) }

// Pop removes and returns the head; the queue must not be empty. Its slot
// is zeroed, so the queue keeps no reference the entry held.
func (q *Queue[T]) Pop() T {
	v := q.buf[q.head]
	var zero T
	q.buf[q.head] = zero
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	return v
}

// Reset empties the queue, keeping its buffer.
func (q *Queue[T]) Reset() {
	for q.size > 0 {
		q.Pop()
	}
	q.head = 0
}

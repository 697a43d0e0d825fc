package wire

import (
	"encoding/binary"
	"io"
	"sync"
)

// Writer buffers outgoing messages and writes them in one system call per
// Flush. Writes larger than the buffer go straight through after flushing
// what is pending. It is not safe for concurrent use.
type Writer struct {
	w   io.Writer
	buf []byte
	err error
	// pool, when set, lends the buffer: it is taken at the first Write and
	// given back by the Flush that empties it, so an idle connection holds
	// no write buffer.
	pool *sync.Pool
	size int
	// lent is the pool's box for the buffer while it is lent: putting
	// the same box back allocates nothing, a new one would (once per
	// Flush, so once per transaction).
	lent *[]byte
}

var bufPools sync.Map // size → *sync.Pool of *[]byte

// NewPooledWriter is NewWriter with a buffer borrowed only while there is
// something to write. For the many mostly idle client connections.
func NewPooledWriter(w io.Writer, size int) *Writer {
	return &Writer{w: w, pool: bufPool(size), size: size}
}

// bufPool returns the pool of buffers of capacity size, which pooled
// writers and readers share.
func bufPool(size int) *sync.Pool {
	if size == DefaultBufferSize {
		// The pooler's usual size: no map look-up, whose boxed key and
		// LoadOrStore's argument (a new sync.Pool and its New closure)
		// were allocated on every call, every login.
		return &defaultBufPool
	}
	p, ok := bufPools.Load(size)
	if !ok {
		p, _ = bufPools.LoadOrStore(size, &sync.Pool{New: func() any {
			b := make([]byte, 0, size)
			return &b
		}})
	}
	return p.(*sync.Pool)
}

// defaultBufPool is bufPools' entry for DefaultBufferSize.
var defaultBufPool = sync.Pool{New: func() any {
	b := make([]byte, 0, DefaultBufferSize)
	return &b
}}

// grab borrows the buffer of a pooled writer.
func (w *Writer) grab() {
	if w.buf == nil && w.pool != nil {
		w.lent = w.pool.Get().(*[]byte)
		w.buf = (*w.lent)[:0]
	}
}

// giveBack returns an empty pooled buffer.
func (w *Writer) giveBack() {
	if w.pool != nil && w.buf != nil && len(w.buf) == 0 {
		*w.lent = w.buf
		w.pool.Put(w.lent)
		w.lent, w.buf = nil, nil
	}
}

// NewWriter returns a Writer with a buffer of size bytes.
func NewWriter(w io.Writer, size int) *Writer {
	return &Writer{w: w, buf: make([]byte, 0, size)}
}

// Buffered reports the number of bytes waiting for Flush.
func (w *Writer) Buffered() int { return len(w.buf) }

// Err returns the first write error; once set, every call fails with it.
func (w *Writer) Err() error { return w.err }

// Write appends p, flushing first when it would not fit.
func (w *Writer) Write(p []byte) error {
	if w.err != nil {
		return w.err
	}
	w.grab()
	if len(w.buf)+len(p) > cap(w.buf) {
		if err := w.Flush(); err != nil {
			return err
		}
		w.grab()
		if len(p) >= cap(w.buf) {
			return w.writeThrough(p)
		}
	}
	w.buf = append(w.buf, p...)
	return nil
}

// WriteMessage appends a message with type typ and the given body.
// The header goes straight into the buffer: a header array handed to
// Write would escape (Write may pass it to the connection) and cost an
// allocation per message.
func (w *Writer) WriteMessage(typ byte, body []byte) error {
	if w.err != nil {
		return w.err
	}
	w.grab()
	if len(w.buf)+5 > cap(w.buf) {
		if err := w.Flush(); err != nil {
			return err
		}
		w.grab()
	}
	w.buf = append(w.buf, typ, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(w.buf[len(w.buf)-4:], uint32(len(body)+4))
	return w.Write(body)
}

// Flush writes everything buffered.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) == 0 {
		w.giveBack()
		return nil
	}
	err := w.writeThrough(w.buf)
	w.buf = w.buf[:0]
	w.giveBack()
	return err
}

// FlushAwaitReply is Flush for a request whose reply the caller reads
// next: on a connection that is a ReplyAwaiter it returns once the reply
// has started to arrive (see sockIO.WriteAwaitReply), which saves a
// read(2) that would find nothing. Otherwise it is Flush.
func (w *Writer) FlushAwaitReply() error {
	a, ok := w.w.(ReplyAwaiter)
	if !ok || w.err != nil || len(w.buf) == 0 {
		return w.Flush()
	}
	n, err := a.WriteAwaitReply(w.buf)
	if err == nil && n < len(w.buf) {
		err = io.ErrShortWrite
	}
	w.err = err
	w.buf = w.buf[:0]
	w.giveBack()
	return err
}

// writeThrough writes p to the connection, recording a failure as the sticky
// error. A short write without an error (a broken io.Writer) is a failure
// too: the peer would otherwise see a silently truncated stream.
func (w *Writer) writeThrough(p []byte) error {
	n, err := w.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	w.err = err
	return err
}

// Reset discards buffered bytes and a sticky error and writes to nw from now on.
func (w *Writer) Reset(nw io.Writer) {
	w.w = nw
	w.buf = w.buf[:0]
	w.err = nil
}

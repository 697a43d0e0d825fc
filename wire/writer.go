package wire

import (
	"encoding/binary"
	"io"
)

// Writer buffers outgoing messages and writes them in one system call per
// Flush. Writes larger than the buffer go straight through after flushing
// what is pending. It is not safe for concurrent use.
type Writer struct {
	w   io.Writer
	buf []byte
	err error
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
	if len(w.buf)+len(p) > cap(w.buf) {
		if err := w.Flush(); err != nil {
			return err
		}
		if len(p) >= cap(w.buf) {
			return w.writeThrough(p)
		}
	}
	w.buf = append(w.buf, p...)
	return nil
}

// WriteMessage appends a message with type typ and the given body.
func (w *Writer) WriteMessage(typ byte, body []byte) error {
	var h [5]byte
	h[0] = typ
	binary.BigEndian.PutUint32(h[1:], uint32(len(body)+4))
	if err := w.Write(h[:]); err != nil {
		return err
	}
	return w.Write(body)
}

// Flush writes everything buffered.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) == 0 {
		return nil
	}
	err := w.writeThrough(w.buf)
	w.buf = w.buf[:0]
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

package wire

import "sync/atomic"

// Relay copies whole messages from r to w, flushing whenever r holds no
// whole message more, until a read or write fails, and adds their sizes
// to bytes (the pooler's SHOW STATS; a replication connection is relayed
// so, message by message); it returns the type of the last message
// relayed and whether the write failed.
func Relay(r *Reader, w *Writer, bytes *atomic.Int64) (last byte, writeFailed bool, err error) {
	for {
		typ, n, err := r.Next()
		if err != nil {
			return last, false, err
		}
		if err := r.Forward(w); err != nil {
			// Forward streams a large message: its error is the
			// reader's or the writer's.
			return last, w.Err() != nil, err
		}
		last = typ
		bytes.Add(int64(5 + n))
		// Flush unless a whole next message is already here: part of
		// one is not enough, as its rest may come only after the other
		// side has read what is held here (a walsender waits for
		// pg_basebackup, which waits for this). Small socket buffers
		// split messages often.
		if !r.Pending() {
			if err := w.Flush(); err != nil {
				return last, true, err
			}
		}
	}
}

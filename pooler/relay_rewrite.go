package pooler

import (
	"unsafe"

	"github.com/pgturnstile/pgturnstile/wire"
)

// A rewrite (link.serve.out) that carries a long statement does not copy its text:
// appendText records where the text goes (a splice), and writeRewrite
// writes the buffer's pieces and the texts in order. A statement held once
// (the registry's definition, the client's unnamed Parse) is so written
// to a server without a second copy of it.
type splice struct {
	at   int // offset in the rewrite buffer
	text []byte
}

// inlineText is the longest text a rewrite copies.
const inlineText = 16 << 10

// appendText appends text to out, or records it as a splice at the end of
// out when it is long. The caller writes out with writeRewrite.
func (l *link) appendText(out, text []byte) []byte {
	if len(text) <= inlineText {
		return append(out, text...)
	}
	l.serve.splices = append(l.serve.splices, splice{at: len(out), text: text})
	return out
}

// appendParseLocked is wire.AppendParse for a rewrite, with the query
// spliced when long (appendText). Called with c.mu held.
func (l *link) appendParseLocked(out []byte, name, query string, types []byte) []byte {
	out = wire.AppendParseHead(out, name, len(query), types)
	// The definition's text is immutable and outlives the write: a view
	// of it, not a copy.
	out = l.appendText(out, unsafe.Slice(unsafe.StringData(query), len(query)))
	return wire.AppendParseTail(out, types)
}

// writeRewrite writes a rewrite buffer with its splices to w.
func (l *link) writeRewrite(w *wire.Writer, out []byte) error {
	if len(l.serve.splices) == 0 {
		return w.Write(out)
	}
	prev := 0
	var err error
	for _, sp := range l.serve.splices {
		if err = w.Write(out[prev:sp.at]); err != nil {
			break
		}
		if err = w.Write(sp.text); err != nil {
			break
		}
		prev = sp.at
	}
	clear(l.serve.splices)
	l.serve.splices = l.serve.splices[:0]
	if err != nil {
		return err
	}
	return w.Write(out[prev:])
}

// shrunk returns buf, or nil when it has grown past what a client should
// keep between messages (a rewritten message carrying a long statement):
// the next message allocates what it needs.
func shrunk(buf []byte) []byte {
	if cap(buf) > keptScratch {
		return nil
	}
	return buf
}

// keptScratch is the largest rewrite buffer a client keeps between
// messages.
const keptScratch = 64 << 10

// Package scalesection keeps `make bench-scale`'s section of BENCHMARKS.md:
// one block per machine it ran on, between markers, inside a region that
// `make bench` (which writes the rest of the file anew) carries over.
package scalesection

import (
	"strings"
)

// The region's markers. Everything between them belongs to bench-scale.
const (
	Begin = "<!-- bench-scale: begin (written by make bench-scale; make bench keeps it) -->"
	End   = "<!-- bench-scale: end -->"
)

// Heading opens the region.
const Heading = "## Scale with cores (`make bench-scale`)"

func blockBegin(key string) string { return "<!-- bench-scale machine: " + key + " -->" }
func blockEnd(key string) string   { return "<!-- /bench-scale machine: " + key + " -->" }

// region returns the bench-scale region of doc (markers included) and where
// it starts, or ok false when doc has none.
func region(doc string) (start, end int, ok bool) {
	start = strings.Index(doc, Begin)
	if start < 0 {
		return 0, 0, false
	}
	rel := strings.Index(doc[start:], End)
	if rel < 0 {
		return 0, 0, false
	}
	return start, start + rel + len(End), true
}

// Carry returns fresh (a report written anew) with old's bench-scale region
// appended, when old has one and fresh does not: `make bench` rewrites
// BENCHMARKS.md and must not lose the machines' scale tables.
func Carry(old, fresh string) string {
	s, e, ok := region(old)
	if !ok {
		return fresh
	}
	if _, _, has := region(fresh); has {
		return fresh
	}
	return strings.TrimRight(fresh, "\n") + "\n\n" + old[s:e] + "\n"
}

// Put returns doc with key's block set to body: the block replaced where
// the region already holds one for key, added at the region's end
// otherwise, and the region (with intro under Heading) added at the end of
// doc where there is none. Other machines' blocks are left as they are.
func Put(doc, intro, key, body string) string {
	block := blockBegin(key) + "\n" + strings.TrimRight(body, "\n") + "\n" + blockEnd(key)
	s, e, ok := region(doc)
	if !ok {
		reg := Begin + "\n" + Heading + "\n\n" + strings.TrimRight(intro, "\n") + "\n\n" + block + "\n" + End
		if strings.TrimSpace(doc) == "" {
			return reg + "\n"
		}
		return strings.TrimRight(doc, "\n") + "\n\n" + reg + "\n"
	}
	reg := doc[s:e]
	if bs := strings.Index(reg, blockBegin(key)); bs >= 0 {
		if be := strings.Index(reg[bs:], blockEnd(key)); be >= 0 {
			reg = reg[:bs] + block + reg[bs+be+len(blockEnd(key)):]
			return doc[:s] + reg + doc[e:]
		}
	}
	inner := strings.TrimRight(strings.TrimSuffix(reg, End), "\n")
	reg = inner + "\n\n" + block + "\n" + End
	return doc[:s] + reg + doc[e:]
}

// Block is one machine's table in the region.
type Block struct{ Key, Body string }

// Blocks returns the machines' blocks of doc's region, in order.
func Blocks(doc string) []Block {
	s, e, ok := region(doc)
	if !ok {
		return nil
	}
	reg := doc[s:e]
	const open = "<!-- bench-scale machine: "
	var out []Block
	for {
		i := strings.Index(reg, open)
		if i < 0 {
			return out
		}
		rest := reg[i+len(open):]
		key, _, ok := strings.Cut(rest, " -->\n")
		if !ok {
			return out
		}
		bodyStart := i + len(open) + len(key) + len(" -->\n")
		j := strings.Index(reg[bodyStart:], blockEnd(key))
		if j < 0 {
			return out
		}
		out = append(out, Block{Key: key, Body: reg[bodyStart : bodyStart+j]})
		reg = reg[bodyStart+j+len(blockEnd(key)):]
	}
}

package shard

// keyword is an identifier the scanner looks for, found once when the
// lexer reads it: the scanner then compares numbers, not letters, and
// tests a word against a set of them with one mask (keywords).
type keyword uint8

const (
	kwNone keyword = iota
	kwAnd
	kwAs
	kwBetween
	kwBigint
	kwCharacter
	kwCross
	kwCurrent
	kwDelete
	kwExcept
	kwFetch
	kwFor
	kwFrom
	kwFull
	kwGroup
	kwHaving
	kwIn
	kwInner
	kwInsert
	kwInt
	kwInt2
	kwInt4
	kwInt8
	kwInteger
	kwIntersect
	kwInto
	kwJoin
	kwLateral
	kwLeft
	kwLimit
	kwNatural
	kwNull
	kwOffset
	kwOn
	kwOnly
	kwOr
	kwOrder
	kwOuter
	kwOverriding
	kwReturning
	kwRight
	kwSelect
	kwSet
	kwSmallint
	kwTablesample
	kwText
	kwUnion
	kwUpdate
	kwUsing
	kwUuid
	kwValues
	kwVarchar
	kwVarying
	kwWhere
	kwWindow
	kwWith

	kwCount // how many there are, kwNone included
)

// A keyword set is a bit mask: the scanner asks "is this one of the words
// that end a clause" with one AND.
type keywords uint64

var _ [64 - kwCount]struct{} // keywords holds every keyword as a bit

func kwMask(ws ...keyword) (s keywords) {
	for _, w := range ws {
		s |= 1 << w
	}
	return s
}

// has reports that k is one of s (never kwNone's bit: no set holds it).
func (s keywords) has(k keyword) bool { return s&(1<<k) != 0 }

// kwNames spells the keywords as Postgres folds them.
var kwNames = [kwCount]string{
	kwAnd:         "and",
	kwAs:          "as",
	kwBetween:     "between",
	kwBigint:      "bigint",
	kwCharacter:   "character",
	kwCross:       "cross",
	kwCurrent:     "current",
	kwDelete:      "delete",
	kwExcept:      "except",
	kwFetch:       "fetch",
	kwFor:         "for",
	kwFrom:        "from",
	kwFull:        "full",
	kwGroup:       "group",
	kwHaving:      "having",
	kwIn:          "in",
	kwInner:       "inner",
	kwInsert:      "insert",
	kwInt:         "int",
	kwInt2:        "int2",
	kwInt4:        "int4",
	kwInt8:        "int8",
	kwInteger:     "integer",
	kwIntersect:   "intersect",
	kwInto:        "into",
	kwJoin:        "join",
	kwLateral:     "lateral",
	kwLeft:        "left",
	kwLimit:       "limit",
	kwNatural:     "natural",
	kwNull:        "null",
	kwOffset:      "offset",
	kwOn:          "on",
	kwOnly:        "only",
	kwOr:          "or",
	kwOrder:       "order",
	kwOuter:       "outer",
	kwOverriding:  "overriding",
	kwReturning:   "returning",
	kwRight:       "right",
	kwSelect:      "select",
	kwSet:         "set",
	kwSmallint:    "smallint",
	kwTablesample: "tablesample",
	kwText:        "text",
	kwUnion:       "union",
	kwUpdate:      "update",
	kwUsing:       "using",
	kwUuid:        "uuid",
	kwValues:      "values",
	kwVarchar:     "varchar",
	kwVarying:     "varying",
	kwWhere:       "where",
	kwWindow:      "window",
	kwWith:        "with",
}

// The keyword table is a perfect hash of an identifier's first eight
// bytes, folded (keywordAt): the lexer names every identifier it reads,
// and one multiplication and two table reads cost less than comparing
// strings. The multiplier is found when the package loads, so the list
// above can change freely.
const (
	kwMinLen   = 2  // the shortest keyword ("as", "in", "on", "or")
	kwMaxLen   = 11 // the longest ("tablesample")
	kwSlotBits = 9  // 512 slots for 55 keywords: a multiplier comes quickly
)

type kwEntry struct {
	w0, w1 uint64 // the keyword's bytes as foldWords loads them
	n      uint8
	kw     keyword
}

var (
	// kwInitials has bit c&31 of row n set when a keyword of n bytes
	// starts with c, in either case.
	kwInitials [kwMaxLen + 1]uint32
	kwMul      uint64
	kwEntries  [kwCount]kwEntry // by keyword; kwNone's, all zero, matches nothing
	kwSlots    [1 << kwSlotBits]keyword
)

func kwHash(w0 uint64) uint { return uint(w0 * kwMul >> (64 - kwSlotBits)) }

func init() {
	for k := kwNone + 1; k < kwCount; k++ {
		name := kwNames[k]
		if len(name) < kwMinLen || len(name) > kwMaxLen {
			panic("shard: keyword " + name + " is outside kwMinLen..kwMaxLen")
		}
		w0, w1 := foldWords([]byte(name), 0, len(name))
		kwEntries[k] = kwEntry{w0: w0, w1: w1, n: uint8(len(name)), kw: k}
		kwInitials[len(name)] |= 1 << (name[0] & 31)
	}
	// Odd multipliers from a fixed sequence (Weyl, by the golden ratio)
	// until every keyword has a slot of its own.
	for m := uint64(0x9e3779b97f4a7c15); ; m += 0x9e3779b97f4a7c16 {
		kwMul = m | 1
		kwSlots = [len(kwSlots)]keyword{}
		ok := true
		for k := kwNone + 1; k < kwCount && ok; k++ {
			h := kwHash(kwEntries[k].w0)
			ok = kwSlots[h] == kwNone
			kwSlots[h] = k
		}
		if ok {
			return
		}
	}
}

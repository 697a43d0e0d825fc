package shard

// keyword is an identifier the scanner looks for, found once when the
// lexer reads it: the scanner then compares numbers, not letters.
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
	kwPgCatalog
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
)

// keywordOf folds an identifier (ASCII letters only, as Postgres does)
// and names the keyword it is, if any.
func keywordOf(w []byte) keyword {
	var buf [16]byte
	if len(w) > len(buf) {
		return kwNone
	}
	for i, c := range w {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	switch string(buf[:len(w)]) {
	case "and":
		return kwAnd
	case "as":
		return kwAs
	case "between":
		return kwBetween
	case "bigint":
		return kwBigint
	case "character":
		return kwCharacter
	case "cross":
		return kwCross
	case "current":
		return kwCurrent
	case "delete":
		return kwDelete
	case "except":
		return kwExcept
	case "fetch":
		return kwFetch
	case "for":
		return kwFor
	case "from":
		return kwFrom
	case "full":
		return kwFull
	case "group":
		return kwGroup
	case "having":
		return kwHaving
	case "in":
		return kwIn
	case "inner":
		return kwInner
	case "insert":
		return kwInsert
	case "int":
		return kwInt
	case "int2":
		return kwInt2
	case "int4":
		return kwInt4
	case "int8":
		return kwInt8
	case "integer":
		return kwInteger
	case "intersect":
		return kwIntersect
	case "into":
		return kwInto
	case "join":
		return kwJoin
	case "lateral":
		return kwLateral
	case "left":
		return kwLeft
	case "limit":
		return kwLimit
	case "natural":
		return kwNatural
	case "null":
		return kwNull
	case "offset":
		return kwOffset
	case "on":
		return kwOn
	case "only":
		return kwOnly
	case "or":
		return kwOr
	case "order":
		return kwOrder
	case "outer":
		return kwOuter
	case "overriding":
		return kwOverriding
	case "pg_catalog":
		return kwPgCatalog
	case "returning":
		return kwReturning
	case "right":
		return kwRight
	case "select":
		return kwSelect
	case "set":
		return kwSet
	case "smallint":
		return kwSmallint
	case "tablesample":
		return kwTablesample
	case "text":
		return kwText
	case "union":
		return kwUnion
	case "update":
		return kwUpdate
	case "using":
		return kwUsing
	case "uuid":
		return kwUuid
	case "values":
		return kwValues
	case "varchar":
		return kwVarchar
	case "varying":
		return kwVarying
	case "where":
		return kwWhere
	case "window":
		return kwWindow
	case "with":
		return kwWith
	}
	return kwNone
}

package shard

// Scatter: a read that runs on every shard of a cluster at once, its rows
// concatenated (shard=all, or on_missing_key = "scatter"). Only a text
// whose answer is the union of each shard's answer qualifies: one SELECT
// (or COPY of a table or such a SELECT TO STDOUT) with nothing that
// orders, limits, groups, aggregates, deduplicates or looks across rows —
// those would be answered per shard, and their concatenation would be a
// wrong answer rather than a refused one.

// ScatterKind is what a scatter relays.
type ScatterKind uint8

const (
	ScatterNone ScatterKind = iota // not a read the router scatters
	ScatterRows                    // SELECT: RowDescription, DataRows, SELECT n
	ScatterCopy                    // COPY … TO STDOUT: CopyOutResponse, CopyData, COPY n
)

// ReasonScatterShape: a scatter of a text that is not such a read.
const ReasonScatterShape Reason = ReasonScatter + 1

// ReasonScatterNamed: a scatter through the extended protocol of a batch
// that is not one statement's Parse or Bind, Describes, Execute of every
// row and Sync (a named portal, a row limit, several statements, a batch
// cut by a Flush), or of a named statement the pooler cannot send ahead
// (max_prepared_statements = 0).
const ReasonScatterNamed Reason = ReasonScatter + 2

func init() {
	routeReasonText[ReasonScatterNamed] = "it would run on every shard, which the router does through the extended protocol only for one statement's Parse or Bind, Describe, Execute (all rows) and Sync in one batch, to the unnamed portal, with max_prepared_statements set for a named statement"
	routeReasonText[ReasonScatterShape] = "it would run on every shard, which the router does only for one SELECT or COPY … TO without ORDER BY, LIMIT, OFFSET, FETCH, GROUP BY, HAVING, DISTINCT, aggregates, window functions, set operations or subqueries"
}

// aggregates are Postgres' built-in aggregate functions (and the ordered-
// set and hypothetical-set ones): any of them called in a scatter makes it
// per-shard partial results.
var aggregates = map[string]bool{
	"count": true, "sum": true, "avg": true, "min": true, "max": true, "array_agg": true,
	"string_agg": true, "json_agg": true, "jsonb_agg": true, "json_object_agg": true,
	"jsonb_object_agg": true, "json_arrayagg": true, "json_objectagg": true, "xmlagg": true,
	"bool_and": true, "bool_or": true, "every": true, "bit_and": true, "bit_or": true,
	"bit_xor": true, "stddev": true, "stddev_pop": true, "stddev_samp": true,
	"variance": true, "var_pop": true, "var_samp": true, "covar_pop": true, "covar_samp": true,
	"corr": true, "regr_avgx": true, "regr_avgy": true, "regr_count": true,
	"regr_intercept": true, "regr_r2": true, "regr_slope": true, "regr_sxx": true,
	"regr_sxy": true, "regr_syy": true, "percentile_cont": true, "percentile_disc": true,
	"mode": true, "rank": true, "dense_rank": true, "percent_rank": true, "cume_dist": true,
	"range_agg": true, "range_intersect_agg": true, "any_value": true,
}

// refusedInScatter are the words that make a SELECT's answer depend on
// rows of other shards.
var refusedInScatter = map[string]bool{
	"order": true, "limit": true, "offset": true, "fetch": true, "group": true,
	"having": true, "distinct": true, "window": true, "over": true, "union": true,
	"intersect": true, "except": true, "into": true, "filter": true,
	"within": true, "lateral": true, "tablesample": true,
}

// Scatterable says whether a text is a read the router may run on every
// shard and concatenate, and how its rows come.
func Scatterable(sql []byte) ScatterKind {
	lx := lexer{src: sql}
	var words [64]byte
	kind := ScatterNone
	selects := 0
	n := 0
	var prev token
	for {
		t := lx.next()
		if t.kind == tokEOF {
			break
		}
		if t.kind == tokBad {
			return ScatterNone
		}
		if n > 0 && prev.kind == tokPunct && sql[prev.start] == ';' {
			return ScatterNone // a second statement
		}
		if t.kind == tokIdent {
			w := sql[t.start:t.end]
			if len(w) > len(words) {
				w = w[:0]
			}
			lw := words[:len(w)]
			for i, c := range w {
				if c >= 'A' && c <= 'Z' {
					c += 'a' - 'A'
				}
				lw[i] = c
			}
			switch {
			case n == 0 && string(lw) == "select":
				kind = ScatterRows
			case n == 0 && string(lw) == "copy":
				kind = ScatterCopy
			case n == 0:
				return ScatterNone
			}
			if string(lw) == "select" {
				selects++
			}
			if refusedInScatter[string(lw)] || selects > 1 {
				return ScatterNone
			}
			if aggregates[string(lw)] {
				// A call, not a column of that name.
				save := lx
				if nt := lx.next(); nt.kind == tokPunct && sql[nt.start] == '(' {
					return ScatterNone
				}
				lx = save
			}
		} else if n == 0 {
			return ScatterNone
		}
		prev = t
		n++
	}
	if kind == ScatterCopy && !copyToStdout(sql) {
		return ScatterNone
	}
	return kind
}

// ReturnsRows reports a text that returns rows: one that starts as such a
// statement (SELECT, WITH, VALUES, TABLE, SHOW, EXPLAIN, FETCH, COPY), or
// a write with RETURNING at its top level. shard=all runs such a text only
// as a scatter, never on each database in turn, whose answer would be one
// database's (its rows dropped, as a write's RETURNING would be).
func ReturnsRows(sql []byte) bool {
	lx := lexer{src: sql}
	first, depth := true, 0
	for {
		t := lx.next()
		switch {
		case t.kind == tokEOF || t.kind == tokBad:
			return false
		case t.kind == tokPunct && sql[t.start] == '(':
			depth++
			continue
		case t.kind == tokPunct && sql[t.start] == ')':
			depth--
			continue
		case t.kind != tokIdent:
			if first {
				return false
			}
			continue
		}
		w := sql[t.start:t.end]
		if first {
			first = false
			for _, k := range []string{"select", "with", "values", "table", "show", "explain", "fetch", "copy"} {
				if equalFold(w, k) {
					return true
				}
			}
			continue
		}
		if depth == 0 && equalFold(w, "returning") {
			return true
		}
	}
}

// copyToStdout: a COPY whose data goes to the client (TO STDOUT), not
// FROM anything nor to a server file or program.
func copyToStdout(sql []byte) bool {
	lx := lexer{src: sql}
	depth := 0
	for {
		t := lx.next()
		switch {
		case t.kind == tokEOF || t.kind == tokBad:
			return false
		case t.kind == tokPunct && sql[t.start] == '(':
			depth++
		case t.kind == tokPunct && sql[t.start] == ')':
			depth--
		case t.kind != tokIdent || depth > 0:
		case equalFold(sql[t.start:t.end], "from"):
			return false
		case equalFold(sql[t.start:t.end], "to"):
			nt := lx.next()
			return nt.kind == tokIdent && equalFold(sql[nt.start:nt.end], "stdout")
		}
	}
}

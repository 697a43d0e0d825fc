package shard

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// Move is one step of resharding (issue 36): logical shards First to Last
// of a colocation go from the database holding them now to another. It
// is the map's part of `pgturnstile shard move`; pausing the range,
// waiting for replication and publishing are the command's.
type Move struct {
	Cluster, Colo string
	First, Last   uint32
	// To is the [databases] entry that will hold the range.
	To string
}

func (mv Move) String() string {
	return fmt.Sprintf("%s.%s %s to %s", mv.Cluster, mv.Colo, Range{First: mv.First, Last: mv.Last}, mv.To)
}

// MovePlan is what a Move changes, for the command's plan and checks.
type MovePlan struct {
	// From is the database holding the whole range now.
	From string
	// Before and After are the colocation's ranges without and with the
	// move, adjacent ranges of one database merged in After.
	Before, After []Range
	// Doc is the map document with the move applied: the same TOML
	// tree with the colocation's shards rewritten (comments and the
	// order of keys are not kept; the content is).
	Doc []byte
	// Publication is the SQL of a publication of the range's rows only,
	// for the source (PublicationSQL), named move_<colo>_<first>_<last>.
	Publication string
}

// PlanMove applies mv to the map document doc (named name in messages)
// and checks the result as ParseStandalone does. The range must lie in
// one database today (a range spread over two is two moves, each with its
// own replication) other than To.
func PlanMove(doc []byte, name string, mv Move) (MovePlan, error) {
	m, err := ParseStandalone(doc, name)
	if err != nil {
		return MovePlan{}, err
	}
	cl := m.Cluster(mv.Cluster)
	if cl == nil {
		return MovePlan{}, fmt.Errorf("%s: no cluster %q", name, mv.Cluster)
	}
	co := cl.Colo(mv.Colo)
	if co == nil {
		return MovePlan{}, fmt.Errorf("%s: cluster %q has no colo %q", name, mv.Cluster, mv.Colo)
	}
	if mv.First > mv.Last || mv.Last >= cl.LogicalShards {
		return MovePlan{}, fmt.Errorf("range %s: cluster %s has logical shards 0-%d", Range{First: mv.First, Last: mv.Last}, mv.Cluster, cl.LogicalShards-1)
	}
	if err := checkName(mv.To); err != "" {
		return MovePlan{}, fmt.Errorf("database %q: %s", mv.To, err)
	}
	plan := MovePlan{From: co.Database(mv.First), Before: slices.Clone(co.Ranges()),
		Publication: PublicationSQL(cl, co, mv.First, mv.Last, fmt.Sprintf("move_%s_%d_%d", mv.Colo, mv.First, mv.Last))}
	for l := mv.First; l <= mv.Last; l++ {
		if db := co.Database(l); db != plan.From {
			return MovePlan{}, fmt.Errorf("range %d-%d of %s.%s lies in %s and %s: move each part on its own",
				mv.First, mv.Last, mv.Cluster, mv.Colo, plan.From, db)
		}
	}
	if plan.From == mv.To {
		return MovePlan{}, fmt.Errorf("range %d-%d of %s.%s is in %s already", mv.First, mv.Last, mv.Cluster, mv.Colo, mv.To)
	}
	// The new ranges: the old ones cut around the moved range, the moved
	// range, and neighbours of one database joined.
	var rs []Range
	for _, r := range co.Ranges() {
		if r.Last < mv.First || r.First > mv.Last {
			rs = append(rs, Range{First: r.First, Last: r.Last, Database: r.Database})
			continue
		}
		if r.First < mv.First {
			rs = append(rs, Range{First: r.First, Last: mv.First - 1, Database: r.Database})
		}
		if r.Last > mv.Last {
			rs = append(rs, Range{First: mv.Last + 1, Last: r.Last, Database: r.Database})
		}
	}
	rs = append(rs, Range{First: mv.First, Last: mv.Last, Database: mv.To})
	slices.SortFunc(rs, func(a, b Range) int { return int(a.First) - int(b.First) })
	for _, r := range rs {
		if n := len(plan.After); n > 0 && plan.After[n-1].Database == r.Database && plan.After[n-1].Last+1 == r.First {
			plan.After[n-1].Last = r.Last
			continue
		}
		plan.After = append(plan.After, r)
	}

	// The document: decoded to its generic tree, the colo's shards
	// replaced, encoded again.
	var tree map[string]any
	if _, err := toml.Decode(string(doc), &tree); err != nil {
		return MovePlan{}, err // parsed above: not reached
	}
	colo, err := findColo(tree, mv.Cluster, mv.Colo)
	if err != nil {
		return MovePlan{}, fmt.Errorf("%s: %v", name, err)
	}
	shards := make([]map[string]any, len(plan.After))
	for i, r := range plan.After {
		shards[i] = map[string]any{"range": r.String(), "database": r.Database}
	}
	colo["shards"] = shards
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# written by pgturnstile shard move: %s (was %s)\n", mv, plan.From)
	if err := toml.NewEncoder(&buf).Encode(tree); err != nil {
		return MovePlan{}, err
	}
	plan.Doc = buf.Bytes()
	if _, err := ParseStandalone(plan.Doc, name); err != nil {
		return MovePlan{}, fmt.Errorf("BUG: the moved map does not parse: %v", err)
	}
	return plan, nil
}

// findColo finds the table of cluster.colo in a decoded map document.
func findColo(tree map[string]any, cluster, colo string) (map[string]any, error) {
	for _, c := range tableList(tree["cluster"]) {
		if c["name"] != cluster {
			continue
		}
		for _, co := range tableList(c["colo"]) {
			if co["name"] == colo {
				return co, nil
			}
		}
	}
	return nil, fmt.Errorf("no colo %s.%s", cluster, colo)
}

// RangesString writes ranges as "0-127 app_s0, 128-255 app_s1".
func RangesString(rs []Range) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String() + " " + r.Database
	}
	return strings.Join(parts, ", ")
}

// tableList is an array of tables as decoded: [[t]] tables, or an inline
// array of inline tables.
func tableList(v any) []map[string]any {
	switch v := v.(type) {
	case []map[string]any:
		return v
	case []any:
		var out []map[string]any
		for _, e := range v {
			if t, ok := e.(map[string]any); ok {
				out = append(out, t)
			}
		}
		return out
	}
	return nil
}

// PublicationSQL is the publication that replicates logical shards
// first-last of colo co of cluster c to a new host: every table of the
// colocation with a row filter by the hash the router and the views use
// (PostgreSQL 15 or later; a row filter on a table that publishes
// UPDATE and DELETE needs the key column in the replica identity, as a
// primary key holding it is).
func PublicationSQL(c *Cluster, co *Colo, first, last uint32, name string) string {
	var tables []string
	for _, t := range co.tableNames(c) {
		tables = append(tables, fmt.Sprintf("public.%s WHERE (%s BETWEEN %d AND %d)", QuoteIdent(t),
			LogicalShardSQL(co.KeyType, c.tables[t].Column, c.LogicalShards), first, last))
	}
	return fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s;\n", QuoteIdent(name), strings.Join(tables, ",\n  "))
}

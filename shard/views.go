package shard

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Logical sharding through views (issue 36, the seed's "logical phase"):
// before any row moves, every shard of a cluster is still the one old
// host, reached as a role of its own whose search_path finds a schema of
// views first. Each view shows the rows of one colo table whose key
// hashes into the shard's logical ranges, by the same hash the router
// uses, WITH CHECK OPTION, so a statement routed to a shard reads and
// writes only that shard's rows, exactly as it will once the shard is a
// database of its own. A query pattern that would break under physical
// sharding breaks now, while rolling back is a map change and a RELOAD.
//
// What could reach past the views is refused by the router for a cluster
// with views = true: SET search_path (and set_config('search_path', …))
// and a colo table named with its schema (public.files).

// More reasons a statement is refused: what would bypass the views.
const (
	ReasonViewsSearchPath Reason = iota + 96 // SET search_path under views
	ReasonViewsQualified                     // a colo table's base table named with its schema
)

func init() {
	routeReasonText[ReasonViewsSearchPath] = "the cluster runs through per-shard views (views = true), which search_path finds; changing it would reach the unsharded tables"
	routeReasonText[ReasonViewsQualified] = "the cluster runs through per-shard views (views = true); a schema-qualified name reaches the table behind them, with every shard's rows"
}

// viewsBypass looks through the statement just scanned for what would
// reach past a views cluster's views: SET/RESET search_path,
// set_config('search_path', …), and a colo table qualified by a schema.
// It reads the tokens Scan made, so it must follow Scan on the same text.
func (s *Scanner) viewsBypass() (r Reason, table []byte) {
	toks := s.toks
	start := true // the token begins a statement
	for i := 0; i < len(toks); i++ {
		t := &toks[i]
		if t.kind == tokPunct && t.ch == ';' {
			start = true
			continue
		}
		if start {
			start = false
			if t.kind == tokIdent && (t.kw == kwSet || s.nameIs(t, "reset")) && s.setsSearchPath(i+1) {
				return ReasonViewsSearchPath, nil
			}
		}
		if t.kind != tokIdent && t.kind != tokQIdent {
			continue
		}
		if t.kind == tokIdent && s.nameIs(t, "set_config") && i+1 < len(toks) && toks[i+1].ch == '(' {
			// A constant name other than search_path is harmless;
			// anything else may be search_path.
			if i+2 >= len(toks) || toks[i+2].kind != tokString {
				return ReasonViewsSearchPath, nil
			}
			v, ok := s.decodeString(toks[i+2])
			if !ok || strings.EqualFold(strings.TrimSpace(string(v)), "search_path") {
				return ReasonViewsSearchPath, nil
			}
		}
		if i >= 2 && toks[i-1].kind == tokPunct && toks[i-1].ch == '.' && (toks[i-2].kind == tokIdent || toks[i-2].kind == tokQIdent) {
			schema, name := s.name(toks[i-2]), s.name(*t)
			if _, _, _, ok := s.lookup(schema, name); ok {
				return ReasonViewsQualified, name
			}
		}
	}
	return ReasonNone, nil
}

// setsSearchPath reports that the tokens from i, after SET or RESET, name
// search_path: [SESSION | LOCAL] search_path.
func (s *Scanner) setsSearchPath(i int) bool {
	toks := s.toks
	if i < len(toks) && toks[i].kind == tokIdent && (s.nameIs(&toks[i], "session") || s.nameIs(&toks[i], "local")) {
		i++
	}
	return i < len(toks) && (toks[i].kind == tokIdent || toks[i].kind == tokQIdent) && strings.EqualFold(string(s.name(toks[i])), "search_path")
}

// LogicalShardSQL is a SQL expression for the logical shard of column
// (a quoted identifier is made of it) of key type t among m logical
// shards, m a power of two: the REMAINDER Postgres gives the row in a
// table PARTITION BY HASH (column) with MODULUS m. The row hash is
// hash_combine64(0, H(key, seed)) = H + combineConst (mod 2^64), and
// with m a power of two only its low bits count, so
//
//	((H & (m-1)) + (combineConst & (m-1))) & (m-1)
//
// stays within bigint. A NULL key is logical shard 0, as in Postgres and
// the router (NullHash).
func LogicalShardSQL(t KeyType, column string, m uint32) string {
	col := QuoteIdent(column)
	var h string
	seed := strconv.FormatInt(int64(partitionSeed), 10)
	switch t {
	case KeyText:
		h = "hashtextextended(" + col + "::text, " + seed + ")"
	case KeyUUID:
		h = "uuid_hash_extended(" + col + ", " + seed + ")"
	default:
		// hashint2/4/8extended agree on equal values: int8 for all.
		h = "hashint8extended(" + col + "::int8, " + seed + ")"
	}
	mask := uint64(m - 1)
	return fmt.Sprintf("COALESCE(((%s & %d) + %d) & %d, 0)", h, mask, combineConst&mask, mask)
}

// QuoteIdent quotes a name as a SQL identifier.
func QuoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// ViewsOptions says where the views' host is, for the [databases] lines.
type ViewsOptions struct {
	Host   string
	Port   int
	DBName string
}

// ViewsDDL is what `pgturnstile shard views` prints for one cluster: the
// SQL that makes, on the one host, a schema and a role per shard database
// (named as the [databases] entry) with a view per colo table filtered to
// the shard's logical ranges, and the [databases] lines that point each
// shard at that host as its role. It is idempotent (CREATE OR REPLACE,
// IF NOT EXISTS), so a changed map is applied by running it again.
func ViewsDDL(c *Cluster, o ViewsOptions) (ddl, databases string, err error) {
	for name := range c.tables {
		if strings.Contains(name, ".") {
			return "", "", fmt.Errorf("cluster %q: table %q is schema-qualified; views are found through search_path, so the colo tables of a cluster served through views are named without their schema (in public)", c.Name, name)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- pgturnstile shard views: cluster %q, %d logical shards.\n", c.Name, c.LogicalShards)
	b.WriteString("-- Run as the owner of the colo tables, in the database that holds them.\n")
	b.WriteString("-- Each shard's role needs a password (\\password ROLE) in the pooler's auth_file,\n")
	b.WriteString("-- or a pg_hba.conf line that lets the pooler in as it.\n")
	b.WriteString("BEGIN;\n")
	// The default database is the host as the application's own role,
	// which sees every row: a range left on it is checked by nothing.
	var shards []string
	for _, db := range c.Databases() {
		if db != c.DefaultDatabase {
			shards = append(shards, db)
		}
	}
	for _, co := range c.colos {
		if slices.Contains(co.databases, c.DefaultDatabase) && len(co.databases) > 1 {
			fmt.Fprintf(&b, "-- note: colo %s keeps logical shards on the default database %s, whose role sees all rows: those ranges are not checked by views\n", co.Name, c.DefaultDatabase)
		}
	}
	var colo []string // every colo table, for the REVOKE
	for _, co := range c.colos {
		colo = append(colo, co.tableNames(c)...)
	}
	for _, db := range shards {
		role := QuoteIdent(db)
		fmt.Fprintf(&b, "\n-- shard %s\n", db)
		fmt.Fprintf(&b, "DO $pgturnstile$BEGIN CREATE ROLE %s LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END$pgturnstile$;\n", role)
		fmt.Fprintf(&b, "CREATE SCHEMA IF NOT EXISTS %s;\n", role)
		fmt.Fprintf(&b, "GRANT USAGE ON SCHEMA %s TO %s;\n", role, role)
		for _, co := range c.colos {
			pred := co.rangesSQL(c, db)
			if pred == "" {
				continue // the colo has no range here
			}
			for _, t := range co.tableNames(c) {
				col := c.tables[t].Column
				fmt.Fprintf(&b, "CREATE OR REPLACE VIEW %s.%s AS SELECT * FROM public.%s WHERE %s WITH CASCADED CHECK OPTION;\n",
					role, QuoteIdent(t), QuoteIdent(t), strings.ReplaceAll(pred, "$KEY", LogicalShardSQL(co.KeyType, col, c.LogicalShards)))
				fmt.Fprintf(&b, "GRANT SELECT, INSERT, UPDATE, DELETE ON %s.%s TO %s;\n", role, QuoteIdent(t), role)
			}
		}
		// The role reaches the unsharded tables as the application
		// does, and the colo tables only through its views.
		fmt.Fprintf(&b, "GRANT USAGE ON SCHEMA public TO %s;\n", role)
		fmt.Fprintf(&b, "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO %s;\n", role)
		fmt.Fprintf(&b, "GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO %s;\n", role)
		quoted := make([]string, len(colo))
		for i, t := range colo {
			quoted[i] = "public." + QuoteIdent(t)
		}
		fmt.Fprintf(&b, "REVOKE ALL ON %s FROM %s;\n", strings.Join(quoted, ", "), role)
		// "$user" in the default search_path finds the schema too; the
		// role's own setting says it outright.
		fmt.Fprintf(&b, "ALTER ROLE %s SET search_path = %s, public;\n", role, role)
	}
	b.WriteString("COMMIT;\n")

	var ini strings.Builder
	for _, db := range shards {
		fmt.Fprintf(&ini, "%s = host=%s port=%d dbname=%s user=%s\n", db, o.Host, o.Port, o.DBName, db)
	}
	return b.String(), ini.String(), nil
}

// tableNames returns the colocation's tables, sorted.
func (co *Colo) tableNames(c *Cluster) []string {
	var out []string
	for name, t := range c.tables {
		if t.Colo == co {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// rangesSQL is the predicate on $KEY (the logical shard expression) for
// the logical shards of co that db holds, adjacent ranges joined; "" when
// it holds none, "TRUE" when it holds them all.
func (co *Colo) rangesSQL(c *Cluster, db string) string {
	var parts []string
	owned := uint32(0)
	for l := uint32(0); l < c.LogicalShards; {
		if co.Database(l) != db {
			l++
			continue
		}
		first := l
		for l < c.LogicalShards && co.Database(l) == db {
			l++
		}
		owned += l - first
		if first == l-1 {
			parts = append(parts, fmt.Sprintf("$KEY = %d", first))
		} else {
			parts = append(parts, fmt.Sprintf("$KEY BETWEEN %d AND %d", first, l-1))
		}
	}
	switch {
	case owned == 0:
		return ""
	case owned == c.LogicalShards:
		return "TRUE"
	case len(parts) == 1:
		return parts[0]
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}

package shard

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// corpusTables are the sharded tables of testdata/schema.sql.
var corpusTables = testTables{
	"files":    {0, "org_id", KeyBigint},
	"comments": {0, "org_id", KeyBigint},
	"orgs":     {0, "id", KeyBigint},
	"docs":     {1, "slug", KeyText},
	"sessions": {2, "sid", KeyUUID},
}

// readCorpus reads testdata/unroutable.sql: one statement a line, "--"
// lines are comments.
func readCorpus(t *testing.T) []string {
	f, err := os.Open("testdata/unroutable.sql")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "--") {
			out = append(out, l)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUnroutableCorpus: every statement of the corpus (which the
// integration test proves PostgreSQL runs) is refused with a reason and
// the table it is about, never routed and never taken for unsharded.
func TestUnroutableCorpus(t *testing.T) {
	stmts := readCorpus(t)
	if len(stmts) < 500 {
		t.Fatalf("corpus has %d statements, want at least 500", len(stmts))
	}
	s := &Scanner{Tables: corpusTables}
	for _, sql := range stmts {
		r := s.Scan([]byte(sql))
		if r.Outcome != Refused || r.Reason == ReasonNone || len(r.Table) == 0 {
			t.Errorf("%s: %v %q table %q", sql, r.Outcome, r.Reason, r.Table)
		}
	}
}

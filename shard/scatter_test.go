package shard

import "testing"

func TestReturnsRows(t *testing.T) {
	for sql, want := range map[string]bool{
		"SELECT count(*) FROM t": true, "(select 1)": true, "with x as (select 1) select * from x": true,
		"VALUES (1)": true, "table t": true, "SHOW x": true, "explain select 1": true, "COPY t TO STDOUT": true,
		"CREATE INDEX i ON t (a)": false, "UPDATE t SET a = 1": false, "": false, "'select'": false,
		"UPDATE t SET a = 1 RETURNING a": true, "delete from t returning *": true,
		"INSERT INTO t VALUES (1) RETURNING id": true, "UPDATE t SET a = 'returning'": false,
		"UPDATE t SET \"returning\" = 1": false, "CREATE FUNCTION f() RETURNS int AS $$ UPDATE t SET a = 1 RETURNING a $$ LANGUAGE sql": false,
		"CREATE RULE r AS ON DELETE TO t DO (DELETE FROM u RETURNING *)": false,
	} {
		if got := ReturnsRows([]byte(sql)); got != want {
			t.Errorf("ReturnsRows(%q) = %v", sql, got)
		}
	}
}

func TestScatterable(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want ScatterKind
	}{
		{"SELECT * FROM files", ScatterRows},
		{"select id, name from files where v > 3 and name like 'a%';", ScatterRows},
		{"SELECT count FROM files", ScatterRows}, // a column named count
		{"SELECT * FROM files f JOIN orgs o ON o.id = f.org_id", ScatterRows},
		{"SELECT * FROM files FOR UPDATE", ScatterRows},
		{"COPY files TO STDOUT", ScatterRows + 1},
		{"copy (select * from files where v = 1) to stdout with (format csv)", ScatterCopy},
		{"COPY files (org_id, name) TO STDOUT", ScatterCopy},
		// Refused: the answer is not the concatenation.
		{"SELECT * FROM files ORDER BY org_id", ScatterNone},
		{"SELECT * FROM files LIMIT 10", ScatterNone},
		{"SELECT * FROM files OFFSET 2", ScatterNone},
		{"SELECT * FROM files FETCH FIRST 1 ROW ONLY", ScatterNone},
		{"SELECT org_id FROM files GROUP BY org_id", ScatterNone},
		{"SELECT DISTINCT org_id FROM files", ScatterNone},
		{"SELECT count(*) FROM files", ScatterNone},
		{"SELECT Max (v) FROM files", ScatterNone},
		{"SELECT row_number() OVER () FROM files", ScatterNone},
		{"SELECT * FROM files UNION ALL SELECT * FROM files", ScatterNone},
		{"SELECT * FROM files WHERE org_id IN (SELECT org_id FROM orgs)", ScatterNone},
		{"WITH x AS (SELECT 1) SELECT * FROM x", ScatterNone},
		{"SELECT * INTO t2 FROM files", ScatterNone},
		{"SELECT 1; SELECT 2", ScatterNone},
		{"SELECT 'unclosed", ScatterNone},
		{"UPDATE files SET v = 1", ScatterNone},
		{"COPY files FROM STDIN", ScatterNone},
		{"COPY files TO '/tmp/x'", ScatterNone},
		{"COPY (SELECT count(*) FROM files) TO STDOUT", ScatterNone},
		{"", ScatterNone},
	} {
		if got := Scatterable([]byte(c.sql)); got != c.want {
			t.Errorf("Scatterable(%q) = %v, want %v", c.sql, got, c.want)
		}
	}
}

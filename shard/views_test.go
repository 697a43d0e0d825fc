package shard

import (
	"strings"
	"testing"
)

// viewsCluster is the example with views = true, its one schema-qualified
// table left out (a views cluster names its colo tables without schema).
func viewsCluster(t *testing.T) *Cluster {
	t.Helper()
	return exampleCluster(t, func(s string) string {
		s = strings.Replace(s, `shadow = false`, "shadow = false\nviews = true", 1)
		return strings.Replace(s, `, "billing.invoices" = "org_id"`, "", 1)
	})
}

func TestViewsFileKey(t *testing.T) {
	if c := viewsCluster(t); !c.Views {
		t.Fatal("views = true not read")
	}
	if c := exampleCluster(t, nil); c.Views {
		t.Fatal("views on by default")
	}
	data, err := readFile("testdata/shards.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ edit, want string }{
		{"views = true", `shards.toml:16: cluster.colo.tables."billing.invoices": table "billing.invoices": with views = true a colo table is named without its schema (search_path finds its views)`},
		{"views = 1", `shards.toml:10: cluster.views: must be a boolean, not integer`},
	} {
		text := strings.Replace(string(data), `shadow = false`, "shadow = false\n"+tc.edit, 1)
		_, err := Parse([]byte(text), "shards.toml", exampleDatabases)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: got %v\nwant %s", tc.edit, err, tc.want)
		}
	}
}

// TestViewsBypassRefused: under views, what would reach past them is
// refused with its own reason; the same statements route as usual on a
// cluster without views, and what merely looks alike is not refused.
func TestViewsBypassRefused(t *testing.T) {
	views := NewRouter(viewsCluster(t))
	plain := NewRouter(exampleCluster(t, func(s string) string {
		return strings.Replace(s, `, "billing.invoices" = "org_id"`, "", 1)
	}))
	for _, tc := range []struct {
		sql   string
		want  Reason
		table string
	}{
		{`SET search_path TO public`, ReasonViewsSearchPath, ""},
		{`set Search_Path = "$user", public`, ReasonViewsSearchPath, ""},
		{`SET LOCAL search_path TO public`, ReasonViewsSearchPath, ""},
		{`SET SESSION "search_path" TO public`, ReasonViewsSearchPath, ""},
		{`RESET search_path`, ReasonViewsSearchPath, ""},
		{`SELECT 1; SET search_path TO public`, ReasonViewsSearchPath, ""},
		{`SELECT set_config('search_path', 'public', false)`, ReasonViewsSearchPath, ""},
		{`SELECT set_config(E'SEARCH_PATH', 'public', true)`, ReasonViewsSearchPath, ""},
		{`SELECT set_config($1, 'public', true)`, ReasonViewsSearchPath, ""},
		{`SELECT * FROM public.files WHERE org_id = 1`, ReasonViewsQualified, "files"},
		{`SELECT * FROM "public"."files" WHERE org_id = 1`, ReasonViewsQualified, "files"},
		{`UPDATE public.orgs SET name = 'x' WHERE id = 7`, ReasonViewsQualified, "orgs"},
		{`INSERT INTO public.files (org_id, name) VALUES (3, 'a')`, ReasonViewsQualified, "files"},
		{`SELECT f.name FROM files f JOIN public.file_versions v ON v.org_id = f.org_id WHERE f.org_id = 1`, ReasonViewsQualified, "file_versions"},
		{`DELETE FROM plans WHERE id IN (SELECT org_id FROM public.files)`, ReasonViewsQualified, "files"},
	} {
		d := views.Route([]byte(tc.sql), Pin{}, false)
		if d.Source != SourceRefused || d.Reason != tc.want || string(d.Table) != tc.table {
			t.Errorf("views: %s: got %+v, want refused (%v, table %q)", tc.sql, d, tc.want.Text(), tc.table)
		}
		if d.Reason.Hint() == "" {
			t.Errorf("%s: no HINT of its own", tc.sql)
		}
		if d := plain.Route([]byte(tc.sql), Pin{}, false); d.Reason == ReasonViewsQualified || d.Reason == ReasonViewsSearchPath {
			t.Errorf("no views: %s: refused as under views: %+v", tc.sql, d)
		}
	}
	for _, sql := range []string{
		`SELECT * FROM files WHERE org_id = 1`,
		`SET application_name = 'search_path'`,
		`SET statement_timeout = 5`,
		`SELECT set_config('statement_timeout', '5s', true)`,
		`SELECT 'public.files', "public.files" FROM plans`,
		`SELECT 1 /* public.files */ FROM plans -- SET search_path TO x`,
		`SELECT * FROM public.plans`,
		`SELECT * FROM app_s0.files`,
		`SELECT pg_catalog.now()`,
		`SELECT $$SET search_path TO public$$`,
	} {
		if d := views.Route([]byte(sql), Pin{}, false); d.Source == SourceRefused {
			t.Errorf("views: %s: refused: %+v (%s)", sql, d, d.Reason.Text())
		}
	}
}

func TestLogicalShardSQL(t *testing.T) {
	for _, tc := range []struct {
		typ  KeyType
		m    uint32
		want string
	}{
		{KeyBigint, 256, `COALESCE(((hashint8extended("org_id"::int8, 8816678312871386365) & 255) + 227) & 255, 0)`},
		{KeySmallint, 8, `COALESCE(((hashint8extended("org_id"::int8, 8816678312871386365) & 7) + 3) & 7, 0)`},
		{KeyText, 4, `COALESCE(((hashtextextended("org_id"::text, 8816678312871386365) & 3) + 3) & 3, 0)`},
		{KeyUUID, 1, `COALESCE(((uuid_hash_extended("org_id", 8816678312871386365) & 0) + 0) & 0, 0)`},
	} {
		if got := LogicalShardSQL(tc.typ, "org_id", tc.m); got != tc.want {
			t.Errorf("%v/%d:\n got %s\nwant %s", tc.typ, tc.m, got, tc.want)
		}
	}
}

func TestViewsDDL(t *testing.T) {
	c := viewsCluster(t)
	ddl, dbs, err := ViewsDDL(c, ViewsOptions{Host: "10.0.0.10", Port: 5433, DBName: "app"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`CREATE OR REPLACE VIEW "app_s0"."files" AS SELECT * FROM public."files" WHERE COALESCE(((hashint8extended("org_id"::int8, 8816678312871386365) & 255) + 227) & 255, 0) BETWEEN 0 AND 127 WITH CASCADED CHECK OPTION;`,
		`CREATE OR REPLACE VIEW "app_s1"."documents" AS SELECT * FROM public."documents" WHERE COALESCE(((uuid_hash_extended("id", 8816678312871386365) & 255) + 227) & 255, 0) BETWEEN 128 AND 255 WITH CASCADED CHECK OPTION;`,
		`REVOKE ALL ON public."file_versions", public."files", public."orgs", public."settings", public."tenants", public."documents" FROM "app_s1";`,
		`ALTER ROLE "app_s0" SET search_path = "app_s0", public;`,
	} {
		if !strings.Contains(ddl, want) {
			t.Errorf("DDL lacks %s", want)
		}
	}
	// The tenant colo lies whole on the default database: no views for
	// it, no schema or role for app_main.
	if strings.Contains(ddl, `"app_main"`) || strings.Contains(ddl, `"tenants" AS`) {
		t.Errorf("DDL for the default database:\n%s", ddl)
	}
	wantDBs := "app_s0 = host=10.0.0.10 port=5433 dbname=app user=app_s0\napp_s1 = host=10.0.0.10 port=5433 dbname=app user=app_s1\n"
	if dbs != wantDBs {
		t.Errorf("[databases] lines:\n%s\nwant\n%s", dbs, wantDBs)
	}
	// Ranges of one database that are not adjacent become an OR;
	// adjacent ones one BETWEEN; all of them no condition.
	c = exampleCluster(t, func(s string) string {
		s = strings.Replace(s, `, "billing.invoices" = "org_id"`, "", 1)
		s = strings.Replace(s, `{ range = "0-127",   database = "app_s0" },`, `{ range = "0-63", database = "app_s0" }, { range = "64-126", database = "app_s0" }, { range = "127", database = "app_s1" },`, 1)
		return strings.Replace(s, `{ range = "128-255", database = "app_s1" },`, `{ range = "128-254", database = "app_s0" }, { range = "255", database = "app_s1" },`, 1)
	})
	ddl, _, err = ViewsDDL(c, ViewsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"app_s0"."files" AS SELECT * FROM public."files" WHERE (COALESCE(((hashint8extended("org_id"::int8, 8816678312871386365) & 255) + 227) & 255, 0) BETWEEN 0 AND 126 OR COALESCE(((hashint8extended("org_id"::int8, 8816678312871386365) & 255) + 227) & 255, 0) BETWEEN 128 AND 254) WITH`,
		`"app_s1"."files" AS SELECT * FROM public."files" WHERE (COALESCE(((hashint8extended("org_id"::int8, 8816678312871386365) & 255) + 227) & 255, 0) = 127 OR COALESCE(((hashint8extended("org_id"::int8, 8816678312871386365) & 255) + 227) & 255, 0) = 255) WITH`,
	} {
		if !strings.Contains(ddl, want) {
			t.Errorf("DDL lacks %s", want)
		}
	}
	// A schema-qualified colo table cannot be served by views.
	if _, _, err := ViewsDDL(exampleCluster(t, nil), ViewsOptions{}); err == nil || !strings.Contains(err.Error(), `"billing.invoices" is schema-qualified`) {
		t.Errorf("qualified table: %v", err)
	}
}

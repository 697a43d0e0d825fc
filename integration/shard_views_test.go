//go:build linux

package integration

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgturnstile/pgturnstile/shard"
)

// TestShardViewsHashMatchesPostgres proves the SQL the views filter by
// (shard.LogicalShardSQL) equal to Postgres' own placement and to the
// router's hash: for every key type, ≥ 10,000 keys in a table PARTITION
// BY HASH (k) with MODULUS 256 and 8, each row's partition (tableoid) is
// the truth; the SQL expression evaluated by Postgres on the row, and the
// package's hash of the key's text, must both give its REMAINDER.
func TestShardViewsHashMatchesPostgres(t *testing.T) {
	needPG(t)
	const db = "vwhash"
	su := directSuperuser(t, "postgres")
	ctx := ctxT(t, 5*time.Minute)
	scratchDatabase(t, ctx, su, db, "")
	conn := directSuperuser(t, db)
	r := rand.New(rand.NewPCG(36, 2))
	for _, tc := range []struct {
		column string
		key    shard.KeyType
		keys   []*string
	}{
		{"bigint", shard.KeyBigint, intKeys(r, math.MinInt64, math.MaxInt64)},
		{"integer", shard.KeyInt, intKeys(r, math.MinInt32, math.MaxInt32)},
		{"smallint", shard.KeySmallint, intKeys(r, math.MinInt16, math.MaxInt16)},
		{"text", shard.KeyText, textKeys(r)},
		{"varchar", shard.KeyText, textKeys(r)},
		{"uuid", shard.KeyUUID, uuidKeys(r)},
	} {
		for _, modulus := range []uint32{256, 8} {
			t.Run(fmt.Sprintf("%s/modulus=%d", tc.column, modulus), func(t *testing.T) {
				table := fmt.Sprintf("vw_%s_%d", tc.column, modulus)
				var ddl strings.Builder
				fmt.Fprintf(&ddl, "CREATE TABLE %s (id int, k %s) PARTITION BY HASH (k);\n", table, tc.column)
				for rem := uint32(0); rem < modulus; rem++ {
					fmt.Fprintf(&ddl, "CREATE TABLE %s_r%d PARTITION OF %s FOR VALUES WITH (MODULUS %d, REMAINDER %d);\n", table, rem, table, modulus, rem)
				}
				if _, err := conn.Exec(ctx, ddl.String()); err != nil {
					t.Fatal(err)
				}
				if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO %s SELECT ord, k::%s FROM unnest($1::text[]) WITH ORDINALITY AS u(k, ord)", table, tc.column), tc.keys); err != nil {
					t.Fatal(err)
				}
				rows, err := conn.Query(ctx, fmt.Sprintf("SELECT id, tableoid::regclass::text, %s FROM %s ORDER BY id", shard.LogicalShardSQL(tc.key, "k", modulus), table))
				if err != nil {
					t.Fatal(err)
				}
				checked, bad := 0, 0
				for rows.Next() {
					var id int32
					var part string
					var sqlShard int64
					if err := rows.Scan(&id, &part, &sqlShard); err != nil {
						t.Fatal(err)
					}
					rem, err := strconv.ParseUint(strings.TrimPrefix(part, table+"_r"), 10, 32)
					if err != nil {
						t.Fatalf("row %d in %q", id, part)
					}
					goShard := shard.NullHash.Logical(modulus)
					if k := tc.keys[id-1]; k != nil {
						h, err := tc.key.HashText([]byte(*k))
						if err != nil {
							t.Fatalf("key %s: %v", quoteKey(k), err)
						}
						goShard = h.Logical(modulus)
					}
					if uint64(sqlShard) != rem || uint64(goShard) != rem {
						bad++
						if bad <= 10 {
							t.Errorf("key %s: Postgres' partition %d, the views' SQL %d, the router's hash %d", quoteKey(tc.keys[id-1]), rem, sqlShard, goShard)
						}
					}
					checked++
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				if checked != len(tc.keys) || checked < 10000 || bad > 0 {
					t.Fatalf("%d of %d keys checked, %d disagree", checked, len(tc.keys), bad)
				}
			})
		}
	}
}

// The logical phase: cluster "vw" whose shards vw_s0 and vw_s1 are the one
// database vw_app reached as roles of their own through the views
// `pgturnstile shard views` prints. Where each key belongs is Postgres'
// answer (a table PARTITION BY HASH (k) WITH MODULUS 8); what each shard
// sees is read directly, through its schema of views.
const vwFile = `
[[cluster]]
name = "vw"
default_database = "vw_main"
logical_shards = 8
views = true
target_users = ["%s"]

[[cluster.colo]]
name = "org"
key_type = "bigint"
tables = { files = "org_id" }
shards = [ { range = "0-2", database = "vw_s0" }, { range = "3-7", database = "vw_s1" } ]

[[cluster.colo]]
name = "tenant"
key_type = "text"
tables = { tenants = "name" }
shards = [ { range = "0-4", database = "vw_s1" }, { range = "5-7", database = "vw_s0" } ]
`

// vwOwner is, per colo, the database of each logical shard, as vwFile says.
var vwOwner = map[string][]string{
	"org":    {"vw_s0", "vw_s0", "vw_s0", "vw_s1", "vw_s1", "vw_s1", "vw_s1", "vw_s1"},
	"tenant": {"vw_s1", "vw_s1", "vw_s1", "vw_s1", "vw_s1", "vw_s0", "vw_s0", "vw_s0"},
}

func TestShardViewsLogicalPhase(t *testing.T) {
	main := needPG(t)
	ctx := ctxT(t, 3*time.Minute)
	su := directSuperuser(t, "postgres")
	t.Cleanup(func() { // after the database's own, which owns what the roles hold
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = su.Exec(ctx, "DROP ROLE IF EXISTS vw_s0")
		_, _ = su.Exec(ctx, "DROP ROLE IF EXISTS vw_s1")
	})
	scratchDatabase(t, ctx, su, "vw_app", appUser)
	app := connectPgx(t, main.directConnString("vw_app", appUser, appPassword))
	for _, ddl := range []string{
		"CREATE TABLE files (id serial, org_id bigint, name text)",
		"CREATE TABLE tenants (name text, v int)",
		"CREATE TABLE plans (id int, name text)",
		"INSERT INTO plans VALUES (1, 'free')",
	} {
		if _, err := app.Exec(ctx, ddl); err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
	}

	// The SQL and [databases] lines, from the binary.
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "shards.toml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(vwFile, appUser)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(poolerBinary(t), "shard", "views", "--host", "127.0.0.1", "--port", strconv.Itoa(main.port), "--dbname", "vw_app", path).CombinedOutput()
	if err != nil {
		t.Fatalf("pgturnstile shard views: %v\n%s", err, out)
	}
	vwsu := directSuperuser(t, "vw_app")
	dbLines := applyViews(t, ctx, vwsu, out, "vw_s")
	extra := fmt.Sprintf("[databases]\nvw_main = host=127.0.0.1 port=%d dbname=vw_app\n%s\n", main.port, strings.Join(dbLines, "\n"))
	p := startPooler(t, iniSettings(withConsoleUsers(map[string]string{"shard_file": path}), extra), opsUserlist)
	cfg := pgxConfig(t, p.ConnString("vw", appUser, appPassword))
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	simple, err := tryConnectPgx(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg = pgxConfig(t, p.ConnString("vw", appUser, appPassword))
	ext, err := tryConnectPgx(t, cfg)
	if err != nil {
		t.Fatal(err)
	}

	// Keys through the router: org keys in the simple protocol, tenant
	// keys extended; each statement also says which role ran it.
	r := rand.New(rand.NewPCG(36, 7))
	var orgKeys, tenantKeys []string
	ranAs := map[string]string{}
	used := map[string]bool{}
	for i := range 300 {
		k := strconv.FormatInt(int64(r.Uint64()>>r.IntN(64))*int64(1-2*(i%2)), 10)
		for used[k] {
			k = strconv.FormatInt(int64(r.Uint64()>>1), 10)
		}
		used[k] = true
		orgKeys = append(orgKeys, k)
		var who string
		if err := simple.QueryRow(ctx, "INSERT INTO files (org_id, name) VALUES ("+k+", 'f"+k+"') RETURNING current_user").Scan(&who); err != nil {
			t.Fatalf("org key %s: %v", k, err)
		}
		ranAs["org/"+k] = who
		tk := fmt.Sprintf("tenant-%d-%s", i, strings.Repeat("ü", i%5))
		tenantKeys = append(tenantKeys, tk)
		if err := ext.QueryRow(ctx, "INSERT INTO tenants (name, v) VALUES ($1, $2) RETURNING current_user", tk, i).Scan(&who); err != nil {
			t.Fatalf("tenant key %s: %v", tk, err)
		}
		ranAs["tenant/"+tk] = who
	}

	// Postgres' placement of each key.
	want := map[string]string{}
	for colo, keys := range map[string][]string{"org": orgKeys, "tenant": tenantKeys} {
		typ := map[string]string{"org": "bigint", "tenant": "text"}[colo]
		if _, err := vwsu.Exec(ctx, fmt.Sprintf("CREATE TABLE truth_%s (k %s) PARTITION BY HASH (k)", colo, typ)); err != nil {
			t.Fatal(err)
		}
		for rem := range 8 {
			if _, err := vwsu.Exec(ctx, fmt.Sprintf("CREATE TABLE truth_%s_%d PARTITION OF truth_%s FOR VALUES WITH (MODULUS 8, REMAINDER %d)", colo, rem, colo, rem)); err != nil {
				t.Fatal(err)
			}
		}
		rows, err := vwsu.Query(ctx, fmt.Sprintf("INSERT INTO truth_%s SELECT unnest($1::text[])::%s RETURNING k::text, tableoid::regclass::text", colo, typ), keys)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var k, part string
			if err := rows.Scan(&k, &part); err != nil {
				t.Fatal(err)
			}
			rem, _ := strconv.Atoi(part[strings.LastIndexByte(part, '_')+1:])
			want[colo+"/"+k] = vwOwner[colo][rem]
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}

	// Each key's statement ran as its shard's role, and each shard's
	// views show exactly its keys; the table behind holds every row once.
	wrong := 0
	for key, db := range want {
		if ranAs[key] != db {
			wrong++
			if wrong <= 5 {
				t.Errorf("%s ran as %q, Postgres places it on %s", key, ranAs[key], db)
			}
		}
	}
	for colo, q := range map[string]string{"org": "SELECT org_id::text FROM %s.files", "tenant": "SELECT name FROM %s.tenants"} {
		seen := map[string]int{}
		for _, db := range []string{"vw_s0", "vw_s1"} {
			rows, err := vwsu.Query(ctx, fmt.Sprintf(q, db))
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var k string
				if err := rows.Scan(&k); err != nil {
					t.Fatal(err)
				}
				seen[colo+"/"+k]++
				if want[colo+"/"+k] != db {
					wrong++
					t.Errorf("%s/%s seen through %s's views, Postgres places it on %s", colo, k, db, want[colo+"/"+k])
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
		}
		var base int
		if err := vwsu.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM public.%s", map[string]string{"org": "files", "tenant": "tenants"}[colo])).Scan(&base); err != nil {
			t.Fatal(err)
		}
		if base != 300 || len(seen) != 300 {
			t.Errorf("%s: %d rows in the table, %d keys seen through the views; want 300 each", colo, base, len(seen))
		}
	}
	if wrong > 0 {
		t.Fatalf("%d keys on the wrong shard", wrong)
	}
	// Every row reads back through the router.
	for _, k := range orgKeys[:50] {
		var name string
		if err := ext.QueryRow(ctx, "SELECT name FROM files WHERE org_id = $1", k).Scan(&name); err != nil || name != "f"+k {
			t.Fatalf("reading org %s back: %q, %v", k, name, err)
		}
	}
	// An unsharded table reached from a shard's role and from the default.
	var plan string
	if err := simple.QueryRow(ctx, "SELECT name FROM plans WHERE id = 1").Scan(&plan); err != nil || plan != "free" {
		t.Fatalf("plans: %q, %v", plan, err)
	}

	// A row sent to the wrong shard on purpose (a target user's shard=
	// hint) is stopped by the views' CHECK OPTION, in Postgres.
	var s1Key string
	for _, k := range orgKeys {
		if want["org/"+k] == "vw_s1" {
			s1Key = k
			break
		}
	}
	_, err = simple.Exec(ctx, "/* pgturnstile: shard=vw_s0 */ INSERT INTO files (org_id, name) VALUES ("+s1Key+", 'misplaced')")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "44000" {
		t.Fatalf("a vw_s1 key written on vw_s0: %v, want 44000 (WITH CHECK OPTION)", err)
	}

	// What would reach past the views is refused, and the connection
	// goes on.
	for _, q := range []string{
		"SET search_path TO public",
		"SELECT set_config('search_path', 'public', false)",
		"SELECT name FROM public.files WHERE org_id = " + s1Key,
	} {
		_, err := simple.Exec(ctx, q)
		if !errors.As(err, &pe) || pe.Code != "0A000" || !strings.Contains(pe.Detail, "views") || pe.Hint == "" {
			t.Fatalf("%s: %v, want 0A000 with a DETAIL about the views and a HINT", q, err)
		}
	}
	if err := simple.QueryRow(ctx, "SELECT name FROM files WHERE org_id = "+s1Key).Scan(&plan); err != nil || plan != "f"+s1Key {
		t.Fatalf("after the refusals: %q, %v", plan, err)
	}
	// A login that sets search_path is refused.
	cfg = pgxConfig(t, p.ConnString("vw", appUser, appPassword))
	cfg.RuntimeParams["search_path"] = "public"
	if _, err := tryConnectPgx(t, cfg); !errors.As(err, &pe) || pe.Code != "0A000" {
		t.Fatalf("login with search_path: %v, want FATAL 0A000", err)
	}

	// Rolling back to unsharded: one map change and a RELOAD. Every range
	// on the default database, which is the application's own role.
	back := strings.NewReplacer(`database = "vw_s0"`, `database = "vw_main"`, `database = "vw_s1"`, `database = "vw_main"`, "views = true", "views = false").Replace(fmt.Sprintf(vwFile, appUser))
	if err := os.WriteFile(path, []byte(back), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := adminConsole(t, p).Exec(ctx, "RELOAD"); err != nil {
		t.Fatal(err)
	}
	var who string
	if err := simple.QueryRow(ctx, "INSERT INTO files (org_id, name) VALUES ("+s1Key+", 'after') RETURNING current_user").Scan(&who); err != nil || who != appUser {
		t.Fatalf("after the rollback: ran as %q (%v), want %s", who, err, appUser)
	}
	if _, err := simple.Exec(ctx, "SELECT name FROM public.files WHERE org_id = "+s1Key); err != nil {
		t.Fatalf("schema-qualified after the rollback: %v", err)
	}
}

// applyViews runs the output of `pgturnstile shard views` as the
// superuser su, as a DBA would with psql (the whole output is SQL), gives
// each shard role (named prefix + a digit) the password pw_<role>, and
// returns the printed [databases] lines (two shards) with those
// passwords.
func applyViews(t *testing.T, ctx context.Context, su *pgx.Conn, out []byte, prefix string) []string {
	t.Helper()
	if _, err := su.Exec(ctx, string(out)); err != nil {
		t.Fatalf("running the printed SQL: %v\n%s", err, out)
	}
	var dbLines []string
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "-- "+prefix); ok {
			role := prefix + rest[:1]
			if _, err := su.Exec(ctx, "ALTER ROLE "+role+" PASSWORD 'pw_"+role+"'"); err != nil {
				t.Fatal(err)
			}
			dbLines = append(dbLines, strings.TrimPrefix(line, "-- ")+" password=pw_"+role)
		}
	}
	if len(dbLines) != 2 {
		t.Fatalf("[databases] lines: %q\n%s", dbLines, out)
	}
	return dbLines
}

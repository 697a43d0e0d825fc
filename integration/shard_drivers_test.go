//go:build linux

package integration

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The driver programs of integration/drivers through the router (issue
// 34's "Done when"): pgjdbc (drivers/java/Shard.java), psycopg 3
// (drivers/python/shard.py) and node-postgres (drivers/node/shard.js)
// connect to cluster "shrt" of the shard rig and insert keyed rows of the
// three key types, each in its own ways (literals and parameters, text and
// binary, unnamed and named statements, batches, pipelines and
// transactions; see each program's header), then read every key back
// through the router. Ground truth: Postgres' canonical form of each key
// as written (a cast), its placement (rig.expected), and the rows read on
// each database directly: every key once, on its database, each mode's
// rows as many as the program says it inserted. A program's transaction
// modes first insert some of their keys with v=0 and roll that
// transaction back, then insert the keys again and commit: a rolled-back
// row that survived anywhere is a second row of its key (or a row of v=0).
//
// The runtimes are the driver matrix's (scripts/test-deps.sh installs
// them); a missing one fails its test with that command, as in package
// drivers, and is never skipped.

// driverKey is a key as a program writes it, and what Postgres makes of
// it.
type driverKey struct {
	colo, spelled, canon, db string
}

// canonical asks Postgres for the text form of each spelling of a colo's
// keys (a cast to the key's type and back).
func (rig *shardRig) canonical(t *testing.T, colo string, spelled []string) map[string]string {
	t.Helper()
	typ := map[string]string{"org": "bigint", "tenant": "text", "dev": "uuid"}[colo]
	rows, err := rig.truth.Query(ctxT(t, time.Minute), "SELECT s, s::"+typ+"::text FROM unnest($1::text[]) s", spelled)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for rows.Next() {
		var s, c string
		if err := rows.Scan(&s, &c); err != nil {
			t.Fatal(err)
		}
		out[s] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// driverKeys makes n distinct keys of each colo for a program, spelled as
// it may write them: odd spellings (blanks, signs, leading zeros in
// integers; upper case, braces, other hyphens in uuids) only where
// spellAll, since pgjdbc binds bigints and uuids from Java's own types.
func driverKeys(r *rand.Rand, n int, spellAll bool) map[string][]string {
	keys := map[string][]string{}
	for i := range n {
		v := r.Int64() - r.Int64()
		if i%5 == 1 {
			v = int64(r.IntN(60000) - 30000) // int2 range (psycopg's %b sends 2 bytes)
		} else if i%5 == 2 {
			v = int64(int32(r.Uint32()))
		}
		k := strconv.FormatInt(v, 10)
		if spellAll {
			switch i % 7 {
			case 3:
				k = "  " + k + " "
			case 4:
				if v >= 0 {
					k = "+" + k
				}
			case 5:
				if v >= 0 {
					k = "000" + k
				}
			}
		}
		keys["org"] = append(keys["org"], k)
	}
	specials := []string{"", " ", "'", "''", `\`, `\\'`, "O'Reilly", "$$", "$1", "--", "/*", "é", "日本語", "🙂", "E'x'", `"q"`, "?", "%s", ";"}
	for i := range n {
		k := fmt.Sprintf("drv-%d-é'\\%d", r.Uint32(), i)
		if i < len(specials) {
			k = specials[i]
		}
		keys["tenant"] = append(keys["tenant"], k)
	}
	for i := range n {
		h := fmt.Sprintf("%08x%04x%04x%04x%012x", r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint64()&0xffffffffffff)
		k := h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
		switch {
		case i%6 == 1:
			k = strings.ToUpper(k)
		case spellAll && i%6 == 2:
			k = "{" + k + "}"
		case spellAll && i%6 == 3:
			k = h
		case spellAll && i%6 == 4:
			var b strings.Builder
			for j := 0; j < 32; j += 4 {
				if j > 0 {
					b.WriteByte('-')
				}
				b.WriteString(h[j : j+4])
			}
			k = b.String()
		}
		keys["dev"] = append(keys["dev"], k)
	}
	return keys
}

// needDriverTool returns path's executable or fails with how to install
// the driver matrix's runtimes.
func needDriverTool(t *testing.T, path string) string {
	t.Helper()
	p, err := exec.LookPath(path)
	if err != nil {
		t.Fatalf("%s not found: %v — install the driver matrix's dependencies with scripts/test-deps.sh", path, err)
	}
	return p
}

func needDriverFile(t *testing.T, path, what string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s missing (%v) — install the driver matrix's dependencies with scripts/test-deps.sh", what, err)
	}
}

// runDriver runs cmd and returns its stdout lines; a failure fails t with
// its stderr.
func runDriver(t *testing.T, cmd *exec.Cmd, timeout time.Duration) []string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", cmd.Path, err)
	}
	timer := time.AfterFunc(timeout, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	if !timer.Stop() {
		err = fmt.Errorf("killed after %v (%v)", timeout, err)
	}
	if err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s\nstdout:\n%s", strings.Join(cmd.Args, " "), err, tail(stderr.String(), 40), tail(stdout.String(), 20))
	}
	return strings.Split(strings.TrimSpace(stdout.String()), "\n")
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// driverEnv is the environment of a program: libpq's variables for the
// cluster, nothing stray from the test's own.
func (rig *shardRig) driverEnv(keysFile string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return append(env, "PGHOST=127.0.0.1", "PGPORT="+strconv.Itoa(rig.p.Port), "PGDATABASE=shrt",
		"PGUSER="+appUser, "PGPASSWORD="+appPassword, "PGSSLMODE=disable", "PGCONNECT_TIMEOUT=10",
		"SHARD_KEYS="+keysFile, "PYTHONDONTWRITEBYTECODE=1")
}

func TestShardDrivers(t *testing.T) {
	// pgjdbc sends extra_float_digits at startup, as PgBouncer's users
	// know.
	rig := startShardRig(t, map[string]string{"ignore_startup_parameters": "extra_float_digits"})
	// The programs' user may name every shard (pgjdbc's scatter read).
	rig.rewrite(t, func(s string) string {
		return strings.Replace(s, "logical_shards = 4\n", "logical_shards = 4\ntarget_users = [\""+appUser+"\"]\n", 1)
	})
	for i, drv := range []struct {
		name     string
		spellAll bool
		run      func(t *testing.T, keysFile string) []string
	}{
		{"pgjdbc", false, func(t *testing.T, keysFile string) []string {
			javac, java := needDriverTool(t, "javac"), needDriverTool(t, "java")
			const jar = "/usr/share/java/postgresql.jar"
			needDriverFile(t, jar, "pgjdbc ("+jar+")")
			classes := t.TempDir()
			if out, err := exec.Command(javac, "-encoding", "UTF-8", "-cp", jar, "-d", classes, filepath.Join("drivers", "java", "Shard.java")).CombinedOutput(); err != nil {
				t.Fatalf("javac: %v\n%s", err, out)
			}
			url := fmt.Sprintf("jdbc:postgresql://127.0.0.1:%d/shrt?user=%s&password=%s&sslmode=disable&connectTimeout=10", rig.p.Port, appUser, appPassword)
			cmd := exec.Command(java, "-Dfile.encoding=UTF-8", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classes+":"+jar, "Shard", url, keysFile)
			cmd.Env = rig.driverEnv(keysFile)
			return runDriver(t, cmd, 3*time.Minute)
		}},
		{"psycopg", true, func(t *testing.T, keysFile string) []string {
			py := needDriverTool(t, "/usr/bin/python3")
			if out, err := exec.Command(py, "-c", "import psycopg").CombinedOutput(); err != nil {
				t.Fatalf("%s cannot import psycopg (%v: %s) — install the driver matrix's dependencies with scripts/test-deps.sh", py, err, out)
			}
			cmd := exec.Command(py, filepath.Join("drivers", "python", "shard.py"))
			cmd.Env = rig.driverEnv(keysFile)
			return runDriver(t, cmd, 3*time.Minute)
		}},
		{"node-postgres", true, func(t *testing.T, keysFile string) []string {
			node := needDriverTool(t, "node")
			needDriverFile(t, filepath.Join("drivers", "node", "node_modules", "pg", "package.json"), "node-postgres (integration/drivers/node/node_modules/pg)")
			cmd := exec.Command(node, "shard.js")
			cmd.Dir = filepath.Join("drivers", "node")
			cmd.Env = rig.driverEnv(keysFile)
			return runDriver(t, cmd, 3*time.Minute)
		}},
	} {
		t.Run(drv.name, func(t *testing.T) {
			rig.clear(t)
			r := rand.New(rand.NewPCG(34, uint64(i)))
			spelled := driverKeys(r, 400, drv.spellAll)
			var keys []driverKey
			var file strings.Builder
			for _, colo := range []string{"org", "tenant", "dev"} {
				canon := rig.canonical(t, colo, spelled[colo])
				var cs []string
				for _, s := range spelled[colo] {
					cs = append(cs, canon[s])
				}
				want := rig.expected(t, colo, cs)
				for _, s := range spelled[colo] {
					k := driverKey{colo, s, canon[s], want[canon[s]]}
					if k.db == "" {
						t.Fatalf("%s key %q: no placement from Postgres", colo, s)
					}
					keys = append(keys, k)
					fmt.Fprintf(&file, "%s\t%s\t%s\n", colo, k.db, s)
				}
			}
			keysFile := filepath.Join(t.TempDir(), "keys.tsv")
			if err := os.WriteFile(keysFile, []byte(file.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			lines := drv.run(t, keysFile)
			elapsed := time.Since(start)

			// What the program says it did.
			perV := map[string]map[int]int{} // colo → v → rows
			read := map[string]int{}
			scattered := map[int]int{}            // v → org rows a scatter read
			rolled := map[string]map[string]int{} // colo → mode → rows rolled back
			for _, l := range lines {
				f := strings.Fields(l)
				switch {
				case len(f) == 5 && f[0] == "inserted":
					v, _ := strconv.Atoi(f[3])
					n, _ := strconv.Atoi(f[4])
					if perV[f[1]] == nil {
						perV[f[1]] = map[int]int{}
					}
					perV[f[1]][v] = n
					if n == 0 {
						t.Errorf("%s: mode %s inserted nothing", f[1], f[2])
					}
				case len(f) == 4 && f[0] == "rolledback":
					n, _ := strconv.Atoi(f[3])
					if rolled[f[1]] == nil {
						rolled[f[1]] = map[string]int{}
					}
					rolled[f[1]][f[2]] = n
					if n == 0 {
						t.Errorf("%s: mode %s rolled back nothing", f[1], f[2])
					}
				case len(f) == 3 && f[0] == "read":
					read[f[1]], _ = strconv.Atoi(f[2])
				case len(f) == 4 && f[0] == "scattered" && f[1] == "org":
					v, _ := strconv.Atoi(f[2])
					scattered[v], _ = strconv.Atoi(f[3])
				default:
					t.Errorf("unexpected output line %q", l)
				}
			}
			// What the databases hold.
			misplaced := 0
			for _, c := range []struct{ colo, table, column string }{{"org", "files", "org_id"}, {"tenant", "tenants", "name"}, {"dev", "devices", "id"}} {
				got := rig.landedRows(t, c.table, c.column)
				gotV := map[int]int{}
				n := 0
				for _, k := range keys {
					if k.colo != c.colo {
						continue
					}
					n++
					rows := got[k.canon]
					if len(rows) != 1 || rows[0].db != k.db {
						misplaced++
						if misplaced <= 5 {
							t.Errorf("%s key %q (%s): rows %v, want one on %s", c.colo, k.spelled, k.canon, rows, k.db)
						}
						continue
					}
					gotV[rows[0].v]++
				}
				if len(got) != n {
					t.Errorf("%s: %d keys in the tables, %d written", c.colo, len(got), n)
				}
				if !maps.Equal(gotV, perV[c.colo]) {
					t.Errorf("%s: rows by mode (v) %v on the databases, the program says %v", c.colo, gotV, perV[c.colo])
				}
				if c.colo == "org" && len(scattered) > 0 && !maps.Equal(scattered, gotV) {
					t.Errorf("org: rows by v a scatter read %v, on the databases %v", scattered, gotV)
				}
				if len(rolled[c.colo]) == 0 {
					t.Errorf("%s: the program rolled back no transaction", c.colo)
				}
				if read[c.colo] != n {
					t.Errorf("%s: the program read back %d rows through the router, want %d", c.colo, read[c.colo], n)
				}
			}
			if drv.name != "node-postgres" && len(scattered) == 0 {
				t.Errorf("%s: no scatter read", drv.name)
			}
			t.Logf("%s: %d rows (%v by colo and v) in %v; %d misplaced; rolled back first %v; read back %v; scattered %v",
				drv.name, len(keys), perV, elapsed.Round(time.Millisecond), misplaced, rolled, read, scattered)
		})
	}
}

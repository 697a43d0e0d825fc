package config

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// render prints a Config in a stable text form for golden files: settings
// that differ from their defaults, every entry, the warnings, and the
// resolved limits of the given pools.
func render(c *Config, trim string, pools [][2]string) string {
	var b strings.Builder
	b.WriteString("# settings that differ from the defaults\n")
	d := Default()
	for _, k := range Keys {
		v, _ := c.Value(k.Name)
		if dv, _ := d.Value(k.Name); v != dv {
			fmt.Fprintf(&b, "%s = %s\n", k.Name, v)
		}
	}
	b.WriteString("\n# databases\n")
	for _, name := range slices.Sorted(maps.Keys(c.Databases)) {
		db := *c.Databases[name]
		db.File = strings.TrimPrefix(db.File, trim)
		fmt.Fprintf(&b, "%+v\n", db)
	}
	b.WriteString("\n# users\n")
	for _, name := range slices.Sorted(maps.Keys(c.Users)) {
		u := *c.Users[name]
		u.File = strings.TrimPrefix(u.File, trim)
		fmt.Fprintf(&b, "%+v\n", u)
	}
	b.WriteString("\n# pools\n")
	for _, name := range slices.Sorted(maps.Keys(c.Pools)) {
		p := *c.Pools[name]
		p.File = strings.TrimPrefix(p.File, trim)
		fmt.Fprintf(&b, "%s: %+v\n", name, p)
	}
	b.WriteString("\n# warnings\n")
	for _, w := range c.Warnings {
		b.WriteString(strings.ReplaceAll(w, trim, "") + "\n")
	}
	b.WriteString("\n# resolved (database, user)\n")
	for _, p := range pools {
		db, ok := c.LookupDatabase(p[0])
		if !ok {
			fmt.Fprintf(&b, "%s %s: no such database\n", p[0], p[1])
			continue
		}
		user := p[1]
		if db.User != "" {
			user = db.User
		}
		e := c.Resolve(db, user)
		fmt.Fprintf(&b, "%s %s: pool_mode=%s pool_size=%d min_pool_size=%d reserve_pool_size=%d max_db_connections=%d max_user_connections=%d\n",
			p[0], user, e.PoolMode, e.PoolSize, e.MinPoolSize, e.ReservePoolSize, e.MaxDBConnections, e.MaxUserConnections)
	}
	return b.String()
}

// TestProductionGolden loads testdata/config/pgbouncer.ini (with its
// %includes) and compares the result with pgbouncer.golden.
func TestProductionGolden(t *testing.T) {
	dir := filepath.Join("..", "testdata", "config")
	c, err := Load(filepath.Join(dir, "pgbouncer.ini"))
	if err != nil {
		t.Fatal(err)
	}
	got := render(c, dir+string(filepath.Separator), [][2]string{
		{"app", "web"}, {"app", "batch"}, {"billing", "batch"}, {"billing", "etl"},
		{"app_ro", "anyone"}, {"tenant_17", "web"}, {"tenant-archive", "etl"}, {"app_ro", "svc.reports"},
	})
	golden := filepath.Join(dir, "pgbouncer.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("resolved config differs from %s (rerun with -update after checking):\n%s", golden, got)
	}
}

package admin

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/config"
)

var update = flag.Bool("update", false, "rewrite testdata/admin/*.columns")

// TestShowColumnsGolden renders every SHOW and compares the RowDescription's
// column names with testdata/admin/<show>.columns.
func TestShowColumnsGolden(t *testing.T) {
	names := make([]string, 0, len(shows))
	for n := range shows {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			r := run1(t, newFake(), RoleAdmin, "SHOW "+strings.ToUpper(n))
			wantOK(t, r, "SHOW")
			if len(r.cols) == 0 {
				t.Fatal("no RowDescription")
			}
			got := strings.Join(r.cols, "\n") + "\n"
			path := filepath.Join("..", "testdata", "admin", n+".columns")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./admin -run Golden -update)", err)
			}
			if got != string(want) {
				t.Errorf("columns of SHOW %s differ from %s:\ngot:\n%s\nwant:\n%s", n, path, got, want)
			}
		})
	}
}

// The upstream column lists as research/pgbouncer.md gives them; the golden
// files must keep them as a prefix (extensions only at the end).
func TestShowColumnsUpstreamPrefix(t *testing.T) {
	upstream := map[string]string{
		"pools":     "database user cl_active cl_waiting cl_active_cancel_req cl_waiting_cancel_req sv_active sv_active_cancel sv_being_canceled sv_idle sv_used sv_tested sv_login maxwait maxwait_us pool_mode load_balance_hosts",
		"clients":   "type user database replication state addr port local_addr local_port connect_time request_time wait wait_us close_needed ptr link remote_pid tls application_name prepared_statements id",
		"sockets":   "type user database replication state addr port local_addr local_port connect_time request_time wait wait_us close_needed ptr link remote_pid tls application_name prepared_statements id recv_pos pkt_pos pkt_remain send_pos send_remain pkt_avail send_avail",
		"databases": "name host port database force_user pool_size min_pool_size reserve_pool_size server_lifetime pool_mode load_balance_hosts max_connections current_connections max_client_connections current_client_connections paused disabled",
		"users":     "name pool_size reserve_pool_size pool_mode max_user_connections current_connections max_user_client_connections current_client_connections",
		"lists":     "list items",
		"config":    "key value default changeable",
		"mem":       "name size used free memtotal",
		"state":     "key value",
		"version":   "version",
		"peers":     "peer_id host port pool_size",
		"totals":    "name value",
	}
	for n, want := range upstream {
		got := strings.Join(colNames(shows[n].cols), " ")
		if !strings.HasPrefix(got, want) {
			t.Errorf("SHOW %s: %q does not start with upstream %q", n, got, want)
		}
	}
	if got := colNames(poolsCols); got[len(got)-1] != "pool_size" {
		t.Errorf("SHOW POOLS must end with the fork's pool_size, got %v", got)
	}
}

func colNames(cs []column) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.name)
	}
	return out
}

func TestShowTypes(t *testing.T) {
	con := newFake()
	check := func(show, col string, oid uint32) {
		t.Helper()
		r := run1(t, con, RoleAdmin, "SHOW "+show)
		i := r.col(col)
		if i < 0 || r.oids[i] != oid {
			t.Errorf("SHOW %s %s: oid %v, want %d", show, col, r.oids, oid)
		}
	}
	check("STATS", "total_xact_count", oidNumeric)
	check("STATS", "database", oidText)
	check("STATS_TOTALS", "bytes_sent", oidNumeric)
	check("TOTALS", "value", oidNumeric)
	check("POOLS", "cl_waiting", oidInt4)
	check("POOLS", "pool_size", oidInt4)
	check("CLIENTS", "connect_time", oidText)
	check("CLIENTS", "port", oidInt4)
	check("USERS", "pool_size", oidText)
	check("USERS", "max_user_connections", oidInt4)
	check("DNS_HOSTS", "ttl", oidInt8)
	check("FDS", "cancel", oidInt8)
	check("FDS", "scram_client_key", oidBytea)
}

func TestShowPools(t *testing.T) {
	r := run1(t, newFake(), RoleStats, "SHOW POOLS")
	wantOK(t, r, "SHOW")
	if len(r.rows) != 2 {
		t.Fatalf("%d rows", len(r.rows))
	}
	for col, want := range map[string]string{
		"database": "d1", "user": "alice", "cl_active": "2", "cl_waiting": "3", "cl_active_cancel_req": "1",
		"sv_active": "2", "sv_idle": "1", "sv_used": "4", "sv_login": "1", "maxwait": "2", "maxwait_us": "500",
		"pool_mode": "transaction", "load_balance_hosts": "NULL", "pool_size": "2",
	} {
		if got := r.get(t, 0, col); got != want {
			t.Errorf("%s = %q, want %q", col, got, want)
		}
	}
	if got := r.get(t, 1, "load_balance_hosts"); got != "round-robin" {
		t.Errorf("load_balance_hosts = %q", got)
	}
}

func TestShowClientsServers(t *testing.T) {
	con := newFake()
	r := run1(t, con, RoleStats, "SHOW CLIENTS")
	ts := t0.Local().Format("2006-01-02 15:04:05 MST")
	for col, want := range map[string]string{
		"type": "C", "user": "alice", "database": "d1", "replication": "none", "state": "waiting",
		"addr": "127.0.0.1", "port": "50000", "local_port": "6432", "connect_time": ts,
		"request_time": t0.Add(time.Second).Local().Format("2006-01-02 15:04:05 MST"),
		"wait":         "1", "wait_us": "500000", "close_needed": "0", "ptr": "C-1", "link": "",
		"remote_pid": "0", "tls": "", "application_name": "psql", "prepared_statements": "0", "id": "7",
	} {
		if got := r.get(t, 0, col); got != want {
			t.Errorf("clients %s = %q, want %q", col, got, want)
		}
	}
	if r.get(t, 1, "user") != "(nouser)" || r.get(t, 1, "database") != "(nodb)" || r.get(t, 1, "request_time") != "NULL" || r.get(t, 1, "state") != "idle" {
		t.Errorf("second client row %v", r.rows[1])
	}
	r = run1(t, con, RoleStats, "SHOW SERVERS")
	for col, want := range map[string]string{
		"type": "S", "state": "active", "close_needed": "1", "link": "C-1", "remote_pid": "4242",
		"tls": "TLSv1.3/TLS_AES_128_GCM_SHA256", "prepared_statements": "3", "id": "11",
	} {
		if got := r.get(t, 0, col); got != want {
			t.Errorf("servers %s = %q, want %q", col, got, want)
		}
	}
	r = run1(t, con, RoleStats, "SHOW SOCKETS")
	var states []string
	for i := range r.rows {
		states = append(states, r.get(t, i, "state"))
	}
	if want := []string{"cl_waiting", "cl_active", "sv_active", "sv_login"}; !slices.Equal(states, want) {
		t.Errorf("sockets states %v, want %v", states, want)
	}
	if r.get(t, 0, "send_avail") != "0" {
		t.Error("buffer columns must be 0")
	}
	if r = run1(t, con, RoleStats, "SHOW ACTIVE_SOCKETS"); len(r.rows) != 0 {
		t.Errorf("active_sockets rows %d", len(r.rows))
	}
}

func TestShowDatabasesUsers(t *testing.T) {
	con := newFake()
	r := run1(t, con, RoleStats, "SHOW DATABASES")
	for col, want := range map[string]string{
		"name": "d1", "host": "127.0.0.1", "port": "5432", "database": "app", "force_user": "NULL",
		"pool_size": "20", "server_lifetime": "3600", "pool_mode": "NULL", "load_balance_hosts": "NULL",
		"current_connections": "8", "current_client_connections": "5", "paused": "1", "disabled": "0",
	} {
		if got := r.get(t, 0, col); got != want {
			t.Errorf("databases %s = %q, want %q", col, got, want)
		}
	}
	if r.get(t, 1, "host") != "NULL" || r.get(t, 1, "force_user") != "bob" || r.get(t, 1, "pool_mode") != "session" || r.get(t, 1, "disabled") != "1" {
		t.Errorf("d2 row %v", r.rows[1])
	}

	r = run1(t, con, RoleStats, "SHOW USERS")
	// Sorted by name; sizes "%9d" or "" as PgBouncer 1.25; pool_mode NULL when inherited.
	want := [][]string{
		{"alice", "       12", "        1", "session", "3", "2", "100", "7"},
		{"bob", "", "", "NULL", "4", "0", "0", "0"},
	}
	for i, w := range want {
		for j, c := range r.cols {
			if got := r.get(t, i, c); got != w[j] {
				t.Errorf("users row %d %s = %q, want %q", i, c, got, w[j])
			}
		}
	}
}

func TestShowStats(t *testing.T) {
	con := newFake()
	r := run1(t, con, RoleStats, "SHOW STATS")
	for col, want := range map[string]string{
		"database": "d1", "total_server_assignment_count": "10", "total_xact_count": "20", "total_query_count": "30",
		"total_received": "4000", "total_sent": "5000", "total_xact_time": "600", "total_query_time": "700",
		"total_wait_time": "800", "total_client_parse_count": "9", "total_server_parse_count": "10",
		"total_bind_count": "11", "total_client_login_count": "12",
		"avg_server_assignment_count": "1", "avg_xact_count": "2", "avg_query_count": "3", "avg_recv": "40",
		"avg_sent": "50", "avg_xact_time": "100", "avg_query_time": "10", "avg_wait_time": "5",
		"avg_client_login_count": "1",
	} {
		if got := r.get(t, 0, col); got != want {
			t.Errorf("stats %s = %q, want %q", col, got, want)
		}
	}
	r = run1(t, con, RoleStats, "SHOW STATS_TOTALS")
	if r.get(t, 0, "bytes_received") != "4000" || r.get(t, 0, "client_login_count") != "12" {
		t.Errorf("stats_totals %v", r.rows[0])
	}
	r = run1(t, con, RoleStats, "SHOW STATS_AVERAGES")
	if r.get(t, 1, "xact_time") != "300" || r.get(t, 0, "avg_bind_count") != "1" {
		t.Errorf("stats_averages %v", r.rows)
	}
	r = run1(t, con, RoleStats, "SHOW TOTALS")
	got := map[string]string{}
	for i := range r.rows {
		got[r.get(t, i, "name")] = r.get(t, i, "value")
	}
	for name, want := range map[string]string{
		"total_xact_count": "21", "total_client_bytes": "4001", "total_server_bytes": "5001",
		"total_client_login_count": "12", "avg_xact_count": "4",
		// weighted: (100*2 + 300*2) / 4, (10*3 + 40*1) / 4, (5*1 + 1*3) / 4
		"avg_xact_time": "200", "avg_query_time": "17", "avg_wait_time": "2",
	} {
		if got[name] != want {
			t.Errorf("totals %s = %q, want %q", name, got[name], want)
		}
	}
	if len(r.rows) != 24 {
		t.Errorf("totals rows %d, want 24", len(r.rows))
	}
}

func TestShowListsStateVersionConfig(t *testing.T) {
	con := newFake()
	r := run1(t, con, RoleStats, "SHOW LISTS")
	if len(r.rows) != 14 || r.get(t, 0, "list") != "databases" || r.get(t, 0, "items") != "2" || r.get(t, 7, "list") != "login_clients" || r.get(t, 7, "items") != "1" {
		t.Errorf("lists %v", r.rows)
	}
	r = run1(t, con, RoleStats, "SHOW STATE")
	if r.get(t, 0, "value") != "no" || r.get(t, 1, "key") != "paused" || r.get(t, 1, "value") != "yes" || r.get(t, 2, "value") != "no" {
		t.Errorf("state %v", r.rows)
	}
	r = run1(t, con, RoleStats, "SHOW VERSION")
	if !slices.Equal(r.cols, []string{"version"}) || len(r.rows) != 1 || r.get(t, 0, "version") != con.Version() {
		t.Errorf("version cols %v rows %v", r.cols, r.rows)
	}
	r = run1(t, con, RoleStats, "show config")
	if len(r.rows) != len(config.Keys) {
		t.Fatalf("config rows %d, want %d", len(r.rows), len(config.Keys))
	}
	for i, k := range config.Keys {
		if r.get(t, i, "key") != k.Name || r.get(t, i, "default") != k.Default {
			t.Fatalf("config row %d = %v, want key %s", i, r.rows[i], k.Name)
		}
		if k.Name == "max_client_conn" && r.get(t, i, "value") != "250" {
			t.Errorf("max_client_conn = %q", r.get(t, i, "value"))
		}
		if k.Name == "listen_port" && r.get(t, i, "changeable") != "no" {
			t.Error("listen_port must not be changeable")
		}
		if k.Name == "default_pool_size" && r.get(t, i, "changeable") != "yes" {
			t.Error("default_pool_size must be changeable")
		}
	}
}

func TestShowEmptyAndHelp(t *testing.T) {
	for _, s := range []string{"PEERS", "PEER_POOLS", "MEM", "DNS_HOSTS", "DNS_ZONES"} {
		r := run1(t, newFake(), RoleAdmin, "SHOW "+s)
		wantOK(t, r, "SHOW")
		if len(r.rows) != 0 {
			t.Errorf("SHOW %s: %d rows", s, len(r.rows))
		}
	}
	r := run1(t, newFake(), RoleStats, "SHOW HELP")
	wantOK(t, r, "SHOW")
	if len(r.notices) != 1 || r.notices[0].Message != "Console usage" || !strings.Contains(r.notices[0].Detail, "SET POOL <user>.<db> = 'args'") || !strings.Contains(r.notices[0].Detail, "SHOW STATS|STATS_TOTALS|STATS_AVERAGES|TOTALS") {
		t.Errorf("help notice %+v", r.notices)
	}
	if r.cols != nil {
		t.Error("SHOW HELP has no result set")
	}
}

func TestFakeParams(t *testing.T) {
	con := newFake()
	r := run1(t, con, RoleStats, "SHOW client_encoding")
	if !slices.Equal(r.cols, []string{"client_encoding"}) || r.get(t, 0, "client_encoding") != "UTF-8" || r.tag != "SHOW" {
		t.Errorf("fake show %+v", r)
	}
	r = run1(t, con, RoleStats, "show TimeZone;")
	if r.get(t, 0, "timezone") != "GMT" {
		t.Errorf("fake timezone %+v", r)
	}
	// SET of a faked parameter: NOTICE and tag SET for any role, nothing called.
	for _, q := range []string{"SET client_encoding = 'UTF8'", "set datestyle to ISO", "SET USER timezone = 'pool_mode=session'"} {
		r = run1(t, con, RoleStats, q)
		wantOK(t, r, "SET")
		if len(r.notices) != 1 || r.notices[0].Message != "SET ignored" {
			t.Errorf("%s: notices %+v", q, r.notices)
		}
	}
	if len(con.calls) != 0 {
		t.Errorf("calls %v", con.calls)
	}
}

// TestExporterScrape reads the console as prometheus-community's
// pgbouncer_exporter does: SHOW VERSION (one column named version), SHOW
// LISTS (2 columns), SHOW CONFIG (4 columns, max_client_conn and
// max_user_connections), then SHOW DATABASES, STATS_TOTALS, POOLS and STATS
// mapped by column name, numeric columns parsed as numbers.
func TestExporterScrape(t *testing.T) {
	con := newFake()
	res := run(t, con, RoleStats, "SHOW STATS;", "SHOW VERSION;", "SHOW LISTS;", "SHOW CONFIG;",
		"SHOW DATABASES;", "SHOW STATS_TOTALS;", "SHOW POOLS;")
	byName := func(r result) []map[string]string {
		var out []map[string]string
		for _, row := range r.rows {
			m := map[string]string{}
			for i, c := range r.cols {
				if row[i] != nil {
					m[c] = *row[i]
				}
			}
			out = append(out, m)
		}
		return out
	}
	number := func(s string) float64 {
		t.Helper()
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("not a number: %q", s)
		}
		return f
	}
	for _, r := range res {
		wantOK(t, r, "SHOW")
	}
	if len(res[1].cols) != 1 || res[1].cols[0] != "version" {
		t.Fatalf("version columns %v", res[1].cols)
	}
	if len(res[2].cols) != 2 {
		t.Fatalf("lists columns %v", res[2].cols)
	}
	cfg := map[string]string{}
	for _, m := range byName(res[3]) {
		cfg[m["key"]] = m["value"]
	}
	if number(cfg["max_client_conn"]) != 250 || number(cfg["max_user_connections"]) != 0 {
		t.Errorf("config %v %v", cfg["max_client_conn"], cfg["max_user_connections"])
	}
	dbs := byName(res[4])
	if dbs[0]["name"] != "d1" || number(dbs[0]["pool_size"]) != 20 || number(dbs[0]["current_connections"]) != 8 || number(dbs[0]["reserve_pool_size"]) != 0 {
		t.Errorf("databases %v", dbs[0])
	}
	st := byName(res[5])
	if number(st[0]["xact_count"]) != 20 || number(st[0]["bytes_sent"]) != 5000 || number(st[0]["wait_time"]) != 800 {
		t.Errorf("stats_totals %v", st[0])
	}
	pools := byName(res[6])
	if number(pools[0]["cl_waiting"]) != 3 || number(pools[0]["sv_idle"]) != 1 || number(pools[0]["maxwait"])+number(pools[0]["maxwait_us"])/1e6 != 2.0005 {
		t.Errorf("pools %v", pools[0])
	}
	stats := byName(res[0])
	if number(stats[1]["total_query_count"]) != 1 || number(stats[0]["avg_query_time"]) != 10 {
		t.Errorf("stats %v", stats)
	}
}

func TestShowAdmission(t *testing.T) {
	r := run1(t, newFake(), RoleStats, "SHOW ADMISSION")
	wantOK(t, r, "SHOW")
	if len(r.rows) != 4 {
		t.Fatalf("%d rows, want 4", len(r.rows))
	}
	want := []map[string]string{
		{"kind": "pool", "name": "NULL", "capacity": "4", "in_use": "3", "waiting": "5", "debt": "NULL", "weight": "NULL",
			"demand": "NULL", "allowed": "NULL", "busy": "0.938", "in_use_seconds": "56.250", "capacity_seconds": "60.000"},
		{"kind": "tier", "name": "high", "capacity": "NULL", "in_use": "2", "debt": "0.00", "mode": "fifo", "granted": "7", "shed": "0",
			"demand": "1.46", "allowed": "4", "busy": "NULL", "in_use_seconds": "NULL", "capacity_seconds": "NULL"},
		{"kind": "tier", "name": "low", "in_use": "1", "waiting": "5", "debt": "1.00", "mode": "lifo", "granted": "3", "shed": "9",
			"demand": "6.00", "allowed": "2"},
		{"kind": "node", "name": "source=batch", "weight": "1.00", "ceiling": "0.50", "alloc": "2.00", "debt": "NULL", "mode": "NULL",
			"demand": "NULL", "allowed": "NULL", "busy": "NULL"},
	}
	for i, cols := range want {
		if got := r.get(t, i, "database"); got != "app" {
			t.Errorf("row %d database = %q", i, got)
		}
		for col, w := range cols {
			if got := r.get(t, i, col); got != w {
				t.Errorf("row %d %s = %q, want %q", i, col, got, w)
			}
		}
	}
}

// TestShowFDsPlain: SHOW FDS over a session that cannot pass descriptors
// is a table: PgBouncer's columns, bytea in hex, pgturnstile's state last;
// admin only.
func TestShowFDsPlain(t *testing.T) {
	r := run1(t, newFake(), RoleAdmin, "SHOW FDS")
	wantOK(t, r, "SHOW")
	if len(r.rows) != 1 {
		t.Fatalf("SHOW FDS: %d rows, want 1", len(r.rows))
	}
	for col, want := range map[string]string{"fd": "-1", "task": "client", "user": "u", "addr": "127.0.0.1", "port": "5000",
		"cancel": "42", "scram_client_key": `\x0102`, "pgturnstile_state": `{"key":"00"}`} {
		if got := r.get(t, 0, col); got != want {
			t.Errorf("SHOW FDS %s = %q, want %q", col, got, want)
		}
	}
	if r := run1(t, newFake(), RoleStats, "SHOW FDS"); len(r.errs) != 1 {
		t.Error("SHOW FDS as a stats user: no error")
	}
}

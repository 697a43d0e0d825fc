package admin

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgturnstile/pgturnstile/config"
)

// A showCmd is one SHOW subject: its columns, in PgBouncer 1.25/1.26's order
// and types, and its rows, read from the Console snapshot.
type showCmd struct {
	adminOnly bool
	cols      []column
	rows      func(Console) [][]value
}

// Column lists. Extensions are appended at the end only (pool_size on
// SHOW POOLS, from Cloudflare's fork), so clients that read by position
// and exporters that read by name both keep working.
var (
	statsCols = cols("sNNNNNNNNNNNNNNNNNNNNNNNN", "database",
		"total_server_assignment_count", "total_xact_count", "total_query_count",
		"total_received", "total_sent", "total_xact_time", "total_query_time",
		"total_wait_time", "total_client_parse_count", "total_server_parse_count",
		"total_bind_count", "total_client_login_count",
		"avg_server_assignment_count", "avg_xact_count", "avg_query_count",
		"avg_recv", "avg_sent", "avg_xact_time", "avg_query_time", "avg_wait_time",
		"avg_client_parse_count", "avg_server_parse_count", "avg_bind_count",
		"avg_client_login_count")
	statsTotalsCols = cols("sNNNNNNNNNNNN", "database",
		"server_assignment_count", "xact_count", "query_count",
		"bytes_received", "bytes_sent", "xact_time", "query_time", "wait_time",
		"client_parse_count", "server_parse_count", "bind_count", "client_login_count")
	statsAveragesCols = cols("sNNNNNNNNNNNN", "database",
		"server_assignment_count", "xact_count", "query_count",
		"bytes_received", "bytes_sent", "xact_time", "query_time", "wait_time",
		"avg_client_parse_count", "avg_server_parse_count", "avg_bind_count", "avg_client_login_count")
	totalsCols = cols("sN", "name", "value")
	poolsCols  = cols("ssiiiiiiiiiiiiissi", "database", "user",
		"cl_active", "cl_waiting", "cl_active_cancel_req", "cl_waiting_cancel_req",
		"sv_active", "sv_active_cancel", "sv_being_canceled", "sv_idle", "sv_used",
		"sv_tested", "sv_login", "maxwait", "maxwait_us", "pool_mode", "load_balance_hosts",
		"pool_size")
	socketNames = []string{"type", "user", "database", "replication", "state",
		"addr", "port", "local_addr", "local_port", "connect_time", "request_time",
		"wait", "wait_us", "close_needed", "ptr", "link", "remote_pid", "tls",
		"application_name", "prepared_statements", "id",
		"recv_pos", "pkt_pos", "pkt_remain", "send_pos", "send_remain", "pkt_avail", "send_avail"}
	connCols      = cols("ssssssisiTTiiississii", socketNames[:21]...)
	socketCols    = cols("ssssssisiTTiiississiiiiiiiii", socketNames...)
	databasesCols = cols("ssissiiiissiiiiii", "name", "host", "port", "database",
		"force_user", "pool_size", "min_pool_size", "reserve_pool_size", "server_lifetime",
		"pool_mode", "load_balance_hosts", "max_connections", "current_connections",
		"max_client_connections", "current_client_connections", "paused", "disabled")
	usersCols = cols("ssssiiii", "name", "pool_size", "reserve_pool_size", "pool_mode",
		"max_user_connections", "current_connections", "max_user_client_connections",
		"current_client_connections")
	listsCols     = cols("si", "list", "items")
	peersCols     = cols("isii", "peer_id", "host", "port", "pool_size")
	peerPoolsCols = cols("iiiii", "peer_id", "cl_active_cancel_req", "cl_waiting_cancel_req",
		"sv_active_cancel", "sv_login")
	fdsCols = cols("issssiqisssssbbs", "fd", "task", "user", "database", "addr", "port",
		"cancel", "link", "client_encoding", "std_strings", "datestyle", "timezone",
		"password", "scram_client_key", "scram_server_key", "pgturnstile_state")
	configCols   = cols("ssss", "key", "value", "default", "changeable")
	memCols      = cols("siiii", "name", "size", "used", "free", "memtotal")
	dnsHostsCols = cols("sqs", "hostname", "ttl", "addrs")
	dnsZonesCols = cols("sqi", "zonename", "serial", "count")
	versionCols  = cols("s", "version")
	stateCols    = cols("ss", "key", "value")
	// SHOW ADMISSION is pgturnstile's own: one row per gate, tier and
	// fair-share node. Columns added later go at the end, so tools that
	// read the first ones by position keep working.
	shardsCols = cols("sssssqsisq", "cluster", "colo", "key_type", "range", "database", "generation", "state", "waiting", "source", "revision")
	// SHOW SHARD_INSTANCES: the fleet sharing the map through etcd.
	shardInstancesCols = cols("sqqsssisqss", "instance", "revision", "latest_revision", "converged", "host", "listen", "pid",
		"updated", "rejected_revision", "rejected", "self")
	routesCols    = cols("ssssq", "cluster", "colo", "source", "reason", "count")
	admissionCols = cols("ssssiiiNNNNsqqNiNNN", "database", "user", "kind", "name",
		"capacity", "in_use", "waiting", "weight", "ceiling", "alloc", "debt", "mode",
		"granted", "shed", "demand", "allowed", "busy", "in_use_seconds", "capacity_seconds")
)

// shows maps each SHOW subject (lower case) to its command. HELP is
// answered separately (a NOTICE, no result set).
var shows = map[string]showCmd{
	"stats":          {cols: statsCols, rows: statsRows},
	"stats_totals":   {cols: statsTotalsCols, rows: statsTotalsRows},
	"stats_averages": {cols: statsAveragesCols, rows: statsAveragesRows},
	"totals":         {cols: totalsCols, rows: totalsRows},
	"pools":          {cols: poolsCols, rows: poolsRows},
	"clients":        {cols: connCols, rows: func(c Console) [][]value { return connRows(c.Clients()) }},
	"servers":        {cols: connCols, rows: func(c Console) [][]value { return connRows(c.Servers()) }},
	"sockets":        {cols: socketCols, rows: socketRows},
	// ACTIVE_SOCKETS lists sockets with unsent or unparsed bytes in their
	// buffers. The pooler exposes no buffer state, so it is always empty.
	"active_sockets": {cols: socketCols, rows: noRows},
	"lists":          {cols: listsCols, rows: listsRows},
	"users":          {cols: usersCols, rows: usersRows},
	"databases":      {cols: databasesCols, rows: databasesRows},
	// PEERS and PEER_POOLS: their rows are peers.go's.
	"peers":      {cols: peersCols, rows: noRows},
	"peer_pools": {cols: peerPoolsCols, rows: noRows},
	// SHOW FDS feeds online restart (-R): admin only, as in PgBouncer;
	// session.showFDs writes it, with the descriptors when it can.
	"fds":    {adminOnly: true, cols: fdsCols, rows: fdsRows},
	"config": {cols: configCols, rows: configRows},
	// PgBouncer's SHOW MEM lists its slab caches; Go has none to show.
	"mem": {cols: memCols, rows: noRows},
	// DNS_HOSTS and DNS_ZONES: their rows are dns.go's.
	"dns_hosts":       {cols: dnsHostsCols, rows: noRows},
	"dns_zones":       {cols: dnsZonesCols, rows: noRows},
	"version":         {cols: versionCols, rows: func(c Console) [][]value { return [][]value{{text(c.Version())}} }},
	"state":           {cols: stateCols, rows: stateRows},
	"admission":       {cols: admissionCols, rows: admissionRows},
	"shards":          {cols: shardsCols, rows: shardsRows},
	"shard_instances": {cols: shardInstancesCols, rows: shardInstancesRows},
	"routes":          {cols: routesCols, rows: routesRows},
}

// helpText is the detail of SHOW HELP's NOTICE: PgBouncer's list plus the
// fork's two SET lines.
const helpText = "\n\tSHOW HELP|CONFIG|DATABASES|POOLS|CLIENTS|SERVERS|USERS|VERSION\n" +
	"\tSHOW PEERS|PEER_POOLS\n" +
	"\tSHOW FDS|SOCKETS|ACTIVE_SOCKETS|LISTS|MEM|STATE\n" +
	"\tSHOW DNS_HOSTS|DNS_ZONES\n" +
	"\tSHOW STATS|STATS_TOTALS|STATS_AVERAGES|TOTALS\n" +
	"\tSHOW ADMISSION\n" +
	"\tSHOW SHARDS|SHARD_INSTANCES|ROUTES\n" +
	"\tSET key = arg\n" +
	"\tSET USER <user> = 'args'\n" +
	"\tSET POOL <user>.<db> = 'args'\n" +
	"\tRELOAD\n" +
	"\tPAUSE [<db>]\n" +
	"\tRESUME [<db>]\n" +
	"\tPAUSE SHARD <cluster>.<colo> [<range>]\n" +
	"\tRESUME SHARD <cluster>.<colo> [<range>]\n" +
	"\tDISABLE <db>\n" +
	"\tENABLE <db>\n" +
	"\tRECONNECT [<db>]\n" +
	"\tKILL [<db>]\n" +
	"\tKILL_CLIENT <client_id>\n" +
	"\tSUSPEND\n" +
	"\tSHUTDOWN\n" +
	"\tSHUTDOWN WAIT_FOR_SERVERS|WAIT_FOR_CLIENTS\n" +
	"\tWAIT_CLOSE [<db>]"

// fakeParams are the settings PgBouncer fakes for drivers that SHOW or SET
// them on every connection; SHOW answers the value, SET a NOTICE.
var fakeParams = []struct{ name, value string }{
	{"client_encoding", "UTF-8"},
	{"default_transaction_isolation", "read committed"},
	{"standard_conforming_strings", "on"},
	{"datestyle", "ISO"},
	{"timezone", "GMT"},
	{"extra_float_digits", "2"},
}

func fakeParam(name string) (string, string, bool) {
	for _, p := range fakeParams {
		if strings.EqualFold(p.name, name) {
			return p.name, p.value, true
		}
	}
	return "", "", false
}

func noRows(Console) [][]value { return nil }

func counters(c *Counters) []value {
	return []value{num(c.ServerAssignmentCount), num(c.XactCount), num(c.QueryCount),
		num(c.Received), num(c.Sent), num(c.XactTime), num(c.QueryTime), num(c.WaitTime),
		num(c.ClientParseCount), num(c.ServerParseCount), num(c.BindCount), num(c.ClientLoginCount)}
}

func statsRows(con Console) [][]value {
	var out [][]value
	for _, s := range con.Stats() {
		row := append([]value{text(s.Database)}, counters(&s.Total)...)
		out = append(out, append(row, counters(&s.Average)...))
	}
	return out
}

func statsTotalsRows(con Console) [][]value {
	var out [][]value
	for _, s := range con.Stats() {
		out = append(out, append([]value{text(s.Database)}, counters(&s.Total)...))
	}
	return out
}

func statsAveragesRows(con Console) [][]value {
	var out [][]value
	for _, s := range con.Stats() {
		out = append(out, append([]value{text(s.Database)}, counters(&s.Average)...))
	}
	return out
}

// totalsRows sums every database, as PgBouncer's show_stat_totals: totals
// and rates add up; the average times are per transaction, query or
// assignment, so they are weighted by the matching rate. Row names are
// PgBouncer's (its stats struct fields with a total_/avg_ prefix).
func totalsRows(con Console) [][]value {
	var tot, avg Counters
	var xactW, queryW, waitW int64
	for _, s := range con.Stats() {
		a := &s.Average
		tot = tot.Add(s.Total)
		avg.ServerAssignmentCount += a.ServerAssignmentCount
		avg.XactCount += a.XactCount
		avg.QueryCount += a.QueryCount
		avg.Received += a.Received
		avg.Sent += a.Sent
		avg.ClientParseCount += a.ClientParseCount
		avg.ServerParseCount += a.ServerParseCount
		avg.BindCount += a.BindCount
		avg.ClientLoginCount += a.ClientLoginCount
		xactW += a.XactTime * a.XactCount
		queryW += a.QueryTime * a.QueryCount
		waitW += a.WaitTime * a.ServerAssignmentCount
	}
	if avg.XactCount > 0 {
		avg.XactTime = xactW / avg.XactCount
	}
	if avg.QueryCount > 0 {
		avg.QueryTime = queryW / avg.QueryCount
	}
	if avg.ServerAssignmentCount > 0 {
		avg.WaitTime = waitW / avg.ServerAssignmentCount
	}
	names := []string{"server_assignment_count", "xact_count", "query_count",
		"client_bytes", "server_bytes", "xact_time", "query_time", "wait_time",
		"ps_client_parse_count", "ps_server_parse_count", "ps_bind_count", "client_login_count"}
	var out [][]value
	for i, v := range counters(&tot) {
		out = append(out, []value{text("total_" + names[i]), v})
	}
	for i, v := range counters(&avg) {
		out = append(out, []value{text("avg_" + names[i]), v})
	}
	return out
}

func poolsRows(con Console) [][]value {
	var out [][]value
	for _, p := range con.Pools() {
		us := p.MaxWait.Microseconds()
		out = append(out, []value{text(p.Database), text(p.User),
			num(p.ClActive), num(p.ClWaiting), num(p.ClActiveCancelReq), num(p.ClWaitingCancelReq),
			num(p.SvActive), num(p.SvActiveCancel), num(p.SvBeingCanceled), num(p.SvIdle),
			num(p.SvUsed), num(p.SvTested), num(p.SvLogin),
			num(us / 1e6), num(us % 1e6), text(p.PoolMode), textOrNull(p.LoadBalanceHosts),
			num(p.PoolSize)})
	}
	return out
}

// formatTime prints a connection time as PgBouncer's format_time_s does
// (local time with the zone abbreviation); an unset time is NULL.
func formatTime(t time.Time) value {
	if t.IsZero() {
		return null
	}
	return text(t.Local().Format("2006-01-02 15:04:05 MST"))
}

func connRow(c *Conn, state string) []value {
	us := c.Wait.Microseconds()
	user, db := c.User, c.Database
	if user == "" {
		user = "(nouser)"
	}
	if db == "" {
		db = "(nodb)"
	}
	repl := c.Replication
	if repl == "" {
		repl = "none"
	}
	return []value{text(c.Type), text(user), text(db), text(repl), text(state),
		text(c.Addr), num(c.Port), text(c.LocalAddr), num(c.LocalPort),
		formatTime(c.ConnectTime), formatTime(c.RequestTime),
		num(us / 1e6), num(us % 1e6), boolValue(c.CloseNeeded),
		text(c.Ptr), text(c.Link), num(c.RemotePID), text(c.TLS),
		text(c.ApplicationName), num(c.PreparedStatements), num(c.ID)}
}

func connRows(cs []Conn) [][]value {
	out := make([][]value, 0, len(cs))
	for i := range cs {
		out = append(out, connRow(&cs[i], cs[i].State))
	}
	return out
}

// socketState names a state as SHOW SOCKETS does: by PgBouncer's list,
// cl_active, cl_waiting, sv_idle, ..., sv_login for servers logging in. An
// idle client sits in the active list there.
func socketState(c *Conn) string {
	if c.Type == "S" {
		if c.State == "new" {
			return "sv_login"
		}
		return "sv_" + c.State
	}
	if c.State == "idle" {
		return "cl_active"
	}
	return "cl_" + c.State
}

// socketRows is SHOW SOCKETS: every client and server with the buffer
// columns, which are 0 here (the pooler exposes no buffer positions).
func socketRows(con Console) [][]value {
	var out [][]value
	for _, list := range [][]Conn{con.Clients(), con.Servers()} {
		for i := range list {
			row := connRow(&list[i], socketState(&list[i]))
			for range 7 {
				row = append(row, text("0"))
			}
			out = append(out, row)
		}
	}
	return out
}

func listsRows(con Console) [][]value {
	l := con.Lists()
	rows := []struct {
		name string
		n    int
	}{
		{"databases", l.Databases}, {"users", l.Users}, {"peers", l.Peers},
		{"pools", l.Pools}, {"peer_pools", l.PeerPools},
		{"free_clients", l.FreeClients}, {"used_clients", l.UsedClients},
		{"login_clients", l.LoginClients}, {"free_servers", l.FreeServers},
		{"used_servers", l.UsedServers}, {"dns_names", l.DNSNames},
		{"dns_zones", l.DNSZones}, {"dns_queries", l.DNSQueries}, {"dns_pending", l.DNSPending},
	}
	out := make([][]value, 0, len(rows))
	for _, r := range rows {
		out = append(out, []value{text(r.name), num(r.n)})
	}
	return out
}

// sizeText prints a per-user size as PgBouncer 1.25 does: right-aligned in
// 9 characters ("%9d"), or "" (not NULL) when unset.
func sizeText(n int) value {
	if n < 0 {
		return text("")
	}
	s := num(n).s
	if len(s) < 9 {
		s = strings.Repeat(" ", 9-len(s)) + s
	}
	return text(s)
}

func usersRows(con Console) [][]value {
	us := slices.Clone(con.Users())
	slices.SortStableFunc(us, func(a, b User) int { return cmp.Compare(a.Name, b.Name) })
	out := make([][]value, 0, len(us))
	for _, u := range us {
		out = append(out, []value{text(u.Name), sizeText(u.PoolSize), sizeText(u.ReservePoolSize),
			textOrNull(u.PoolMode), num(u.MaxUserConnections), num(u.CurrentConnections),
			num(u.MaxUserClientConnections), num(u.CurrentClientConnections)})
	}
	return out
}

func databasesRows(con Console) [][]value {
	var out [][]value
	for _, d := range con.Databases() {
		out = append(out, []value{text(d.Name), textOrNull(d.Host), num(d.Port),
			text(d.Database), textOrNull(d.ForceUser),
			num(d.PoolSize), num(d.MinPoolSize), num(d.ReservePoolSize),
			num(int64(d.ServerLifetime / time.Second)),
			textOrNull(d.PoolMode), textOrNull(d.LoadBalanceHosts),
			num(d.MaxConnections), num(d.CurrentConnections),
			num(d.MaxClientConnections), num(d.CurrentClientConnections),
			boolValue(d.Paused), boolValue(d.Disabled)})
	}
	return out
}

// configRows is SHOW CONFIG from the key table, in its (sorted) order.
func configRows(con Console) [][]value {
	cfg := con.Config()
	out := make([][]value, 0, len(config.Keys))
	for _, k := range config.Keys {
		v, _ := cfg.Value(k.Name)
		if k.Name == "shard_etcd_password" && v != "" {
			v = "********" // the console is no place to read a password back
		}
		changeable := "no"
		if k.Reloadable {
			changeable = "yes"
		}
		out = append(out, []value{text(k.Name), text(v), text(k.Default), text(changeable)})
	}
	return out
}

func yesNo(b bool) value {
	if b {
		return text("yes")
	}
	return text("no")
}

func stateRows(con Console) [][]value {
	s := con.State()
	return [][]value{
		{text("active"), yesNo(s.Active)},
		{text("paused"), yesNo(s.Paused)},
		{text("suspended"), yesNo(s.Suspended)},
	}
}

func shardsRows(con Console) [][]value {
	var out [][]value
	for _, r := range con.Shards() {
		state := "running"
		if r.Paused {
			state = "paused"
		}
		rev := null
		if r.Revision != 0 {
			rev = num(r.Revision)
		}
		out = append(out, []value{text(r.Cluster), text(r.Colo), text(r.KeyType), text(r.Range), text(r.Database), num(r.Generation),
			text(state), num(r.Waiting), text(r.Source), rev})
	}
	return out
}

func shardInstancesRows(con Console) [][]value {
	var out [][]value
	for _, r := range con.ShardInstances() {
		rejRev, rej := null, null
		if r.RejectedRevision != 0 {
			rejRev, rej = num(r.RejectedRevision), text(r.Rejected)
		}
		out = append(out, []value{text(r.Instance), num(r.Revision), num(r.Latest), yesNo(r.Revision == r.Latest),
			text(r.Host), text(r.Listen), num(r.PID), text(r.Updated.UTC().Format(time.RFC3339Nano)), rejRev, rej, yesNo(r.Self)})
	}
	return out
}

func routesRows(con Console) [][]value {
	var out [][]value
	for _, r := range con.Routes() {
		reason := null
		if r.Reason != "" {
			reason = text(r.Reason)
		}
		colo := null
		if r.Colo != "" {
			colo = text(r.Colo)
		}
		out = append(out, []value{text(r.Cluster), colo, text(r.Source), reason, num(r.Count)})
	}
	return out
}

func admissionRows(con Console) [][]value {
	var out [][]value
	for _, r := range con.Admission() {
		row := []value{text(r.Database), text(r.User), text(r.Kind), text(r.Name),
			null, num(r.InUse), num(r.Waiting), null, null, null, null, null, null, null,
			null, null, null, null, null}
		switch r.Kind {
		case "pool":
			row[3] = null
			row[4] = num(r.Capacity)
			row[16], row[17], row[18] = fixed(r.Busy, 3), fixed(r.InUseSeconds, 3), fixed(r.CapacitySeconds, 3)
		case "tier":
			row[10], row[11] = decimal(r.Debt), text(r.Mode)
			row[12], row[13] = num(r.Granted), num(r.Shed)
			row[14], row[15] = decimal(r.Demand), num(r.Allowed)
		case "node":
			row[7], row[8], row[9] = decimal(r.Weight), decimal(r.Ceiling), decimal(r.Alloc)
		}
		out = append(out, row)
	}
	return out
}

// decimal prints a fraction for a numeric column with two decimals, enough
// for debt and shares and stable for tests.
func decimal(f float64) value { return fixed(f, 2) }

// fixed prints a numeric column with prec decimals: three for the busy
// fraction and the slot-seconds it comes from (a millisecond of one slot).
func fixed(f float64, prec int) value { return text(strconv.FormatFloat(f, 'f', prec, 64)) }

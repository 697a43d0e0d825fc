package admin

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/wire"
)

// fakeConsole is a Console with fixed snapshots that records every command
// call as text, e.g. `Pause("db1")`.
type fakeConsole struct {
	cfg   *config.Config
	calls []string
	err   error // returned by every command when set

	pools     []Pool
	clients   []Conn
	servers   []Conn
	databases []Database
	users     []User
	stats     []Stats
	state     State
	lists     Lists
	admission []AdmissionRow
	shards    []ShardRow
	instances []ShardInstanceRow
	routes    []RouteRow
	queries   int // ConsoleQuery calls
}

func (f *fakeConsole) record(format string, args ...any) error {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
	return f.err
}

func (f *fakeConsole) Config() *config.Config             { return f.cfg }
func (f *fakeConsole) Version() string                    { return "PgBouncer 1.25.1 (pgturnstile test)" }
func (f *fakeConsole) Pools() []Pool                      { return f.pools }
func (f *fakeConsole) Clients() []Conn                    { return f.clients }
func (f *fakeConsole) Servers() []Conn                    { return f.servers }
func (f *fakeConsole) Databases() []Database              { return f.databases }
func (f *fakeConsole) Users() []User                      { return f.users }
func (f *fakeConsole) Stats() []Stats                     { return f.stats }
func (f *fakeConsole) State() State                       { return f.state }
func (f *fakeConsole) Lists() Lists                       { return f.lists }
func (f *fakeConsole) ConsoleQuery()                      { f.queries++ }
func (f *fakeConsole) Admission() []AdmissionRow          { return f.admission }
func (f *fakeConsole) Shards() []ShardRow                 { return f.shards }
func (f *fakeConsole) Routes() []RouteRow                 { return f.routes }
func (f *fakeConsole) ShardInstances() []ShardInstanceRow { return f.instances }
func (f *fakeConsole) Pause(db string) error              { return f.record("Pause(%q)", db) }
func (f *fakeConsole) Resume(db string) error             { return f.record("Resume(%q)", db) }
func (f *fakeConsole) Disable(db string) error            { return f.record("Disable(%q)", db) }
func (f *fakeConsole) Enable(db string) error             { return f.record("Enable(%q)", db) }
func (f *fakeConsole) Reconnect(db string) error          { return f.record("Reconnect(%q)", db) }
func (f *fakeConsole) Kill(db string) error               { return f.record("Kill(%q)", db) }
func (f *fakeConsole) KillClient(id uint64) error {
	return f.record("KillClient(%d)", id)
}
func (f *fakeConsole) WaitClose(db string) error { return f.record("WaitClose(%q)", db) }
func (f *fakeConsole) Reload() error             { return f.record("Reload()") }
func (f *fakeConsole) Shutdown(mode ShutdownMode) {
	_ = f.record("Shutdown(%d)", mode)
}
func (f *fakeConsole) Set(key, value string) error { return f.record("Set(%q, %q)", key, value) }
func (f *fakeConsole) SetUser(name, settings string) error {
	return f.record("SetUser(%q, %q)", name, settings)
}
func (f *fakeConsole) SetPool(user, db, settings string) error {
	return f.record("SetPool(%q, %q, %q)", user, db, settings)
}

func (f *fakeConsole) PauseShard(target, rng string) error {
	return f.record("PauseShard(%q, %q)", target, rng)
}
func (f *fakeConsole) ResumeShard(target, rng string) error {
	return f.record("ResumeShard(%q, %q)", target, rng)
}

func (f *fakeConsole) Suspend() error { return f.record("Suspend()") }
func (f *fakeConsole) FDs(bool) []FD {
	return []FD{{FD: -1, ID: 7, Task: "client", User: "u", Database: "d", Addr: "127.0.0.1", Port: 5000, Cancel: 42,
		ScramClientKey: []byte{1, 2}, State: `{"key":"00"}`}}
}
func (f *fakeConsole) HandOver(ids []uint64) { f.record("HandOver(%v)", ids) }

var t0 = time.Date(2026, 3, 1, 12, 30, 45, 0, time.UTC)

// newFake returns a console in a known state: 3 clients waiting in pool
// (d1, alice), one database paused, stats with known numbers.
func newFake() *fakeConsole {
	cfg := config.Default()
	if err := cfg.Set("max_client_conn", "250"); err != nil {
		panic(err)
	}
	return &fakeConsole{
		cfg: cfg,
		pools: []Pool{
			{Database: "d1", User: "alice", ClActive: 2, ClWaiting: 3, ClActiveCancelReq: 1, ClWaitingCancelReq: 0,
				SvActive: 2, SvActiveCancel: 0, SvBeingCanceled: 0, SvIdle: 1, SvUsed: 4, SvTested: 0, SvLogin: 1,
				MaxWait: 2*time.Second + 500*time.Microsecond, PoolMode: "transaction", PoolSize: 2},
			{Database: "d2", User: "bob", PoolMode: "session", LoadBalanceHosts: "round-robin", PoolSize: 5},
		},
		clients: []Conn{
			{Type: "C", User: "alice", Database: "d1", Replication: "none", State: "waiting", Addr: "127.0.0.1", Port: 50000,
				LocalAddr: "127.0.0.1", LocalPort: 6432, ConnectTime: t0, RequestTime: t0.Add(time.Second),
				Wait: 1500 * time.Millisecond, Ptr: "C-1", ApplicationName: "psql", ID: 7},
			{Type: "C", State: "idle", Addr: "unix", ConnectTime: t0, Ptr: "C-2", ID: 8},
		},
		servers: []Conn{
			{Type: "S", User: "alice", Database: "d1", Replication: "none", State: "active", Addr: "10.0.0.1", Port: 5432,
				LocalAddr: "10.0.0.2", LocalPort: 41000, ConnectTime: t0, RequestTime: t0, CloseNeeded: true,
				Ptr: "S-1", Link: "C-1", RemotePID: 4242, TLS: "TLSv1.3/TLS_AES_128_GCM_SHA256", PreparedStatements: 3, ID: 11},
			{Type: "S", User: "bob", Database: "d2", State: "new", Ptr: "S-2", ID: 12},
		},
		databases: []Database{
			{Name: "d1", Host: "127.0.0.1", Port: 5432, Database: "app", PoolSize: 20, MinPoolSize: 0, ReservePoolSize: 0,
				ServerLifetime: 3600 * time.Second, MaxConnections: 0, CurrentConnections: 8, MaxClientConnections: 0,
				CurrentClientConnections: 5, Paused: true},
			{Name: "d2", Port: 5432, Database: "d2", ForceUser: "bob", PoolSize: 4, PoolMode: "session", Disabled: true},
		},
		users: []User{
			{Name: "bob", PoolSize: -1, ReservePoolSize: -1, MaxUserConnections: 4},
			{Name: "alice", PoolSize: 12, ReservePoolSize: 1, PoolMode: "session", MaxUserConnections: 3, CurrentConnections: 2,
				MaxUserClientConnections: 100, CurrentClientConnections: 7},
		},
		stats: []Stats{
			{Database: "d1",
				Total:   Counters{ServerAssignmentCount: 10, XactCount: 20, QueryCount: 30, Received: 4000, Sent: 5000, XactTime: 600, QueryTime: 700, WaitTime: 800, ClientParseCount: 9, ServerParseCount: 10, BindCount: 11, ClientLoginCount: 12},
				Average: Counters{ServerAssignmentCount: 1, XactCount: 2, QueryCount: 3, Received: 40, Sent: 50, XactTime: 100, QueryTime: 10, WaitTime: 5, ClientParseCount: 1, ServerParseCount: 1, BindCount: 1, ClientLoginCount: 1}},
			{Database: "d2",
				Total:   Counters{XactCount: 1, QueryCount: 1, Received: 1, Sent: 1, XactTime: 1, QueryTime: 1},
				Average: Counters{ServerAssignmentCount: 3, XactCount: 2, QueryCount: 1, XactTime: 300, QueryTime: 40, WaitTime: 1}},
		},
		state: State{Active: false, Paused: true},
		admission: []AdmissionRow{
			{Database: "app", User: "alice", Kind: "pool", Capacity: 4, InUse: 3, Waiting: 5,
				Busy: 0.9375, InUseSeconds: 56.25, CapacitySeconds: 60},
			{Database: "app", User: "alice", Kind: "tier", Name: "high", InUse: 2, Debt: 0, Mode: "fifo", Granted: 7,
				Demand: 1.456, Allowed: 4},
			{Database: "app", User: "alice", Kind: "tier", Name: "low", InUse: 1, Waiting: 5, Debt: 1, Mode: "lifo", Granted: 3, Shed: 9,
				Demand: 6.004, Allowed: 2},
			{Database: "app", User: "alice", Kind: "node", Name: "source=batch", InUse: 1, Waiting: 5, Weight: 1, Ceiling: 0.5, Alloc: 2},
		},
		lists: Lists{Databases: 2, Users: 3, Pools: 2, FreeClients: 5, UsedClients: 4, LoginClients: 1, FreeServers: 6, UsedServers: 2},
	}
}

// result is what the client saw for one query.
type result struct {
	cols    []string
	oids    []uint32
	rows    [][]*string
	tag     string
	errs    []wire.ErrorFields
	notices []wire.ErrorFields
	ready   bool
}

// col returns the index of a column by name, -1 if absent.
func (r *result) col(name string) int {
	for i, c := range r.cols {
		if c == name {
			return i
		}
	}
	return -1
}

// get returns row i's value of column name ("NULL" for NULL); it fails the
// test when the column is missing.
func (r *result) get(t *testing.T, i int, name string) string {
	t.Helper()
	c := r.col(name)
	if c < 0 {
		t.Fatalf("no column %q in %v", name, r.cols)
	}
	if i >= len(r.rows) {
		t.Fatalf("no row %d (have %d)", i, len(r.rows))
	}
	if v := r.rows[i][c]; v != nil {
		return *v
	}
	return "NULL"
}

// session runs Serve over the given client messages and returns the raw
// reply and Serve's error.
func runRaw(t *testing.T, con Console, role Role, in []byte) ([]byte, error) {
	t.Helper()
	var out bytes.Buffer
	r := wire.NewReader(bytes.NewReader(in), wire.DefaultBufferSize)
	w := wire.NewWriter(&out, wire.DefaultBufferSize)
	err := Serve(con, r, w, "tester", role)
	return out.Bytes(), err
}

// run sends each query and a Terminate, and splits the reply into one
// result per ReadyForQuery.
func run(t *testing.T, con Console, role Role, queries ...string) []result {
	t.Helper()
	var in []byte
	for _, q := range queries {
		in = wire.AppendQuery(in, q)
	}
	in = wire.AppendTerminate(in)
	out, err := runRaw(t, con, role, in)
	if err != nil {
		t.Fatalf("Serve: %v", err)
	}
	res := decode(t, out)
	if len(res) != len(queries) {
		t.Fatalf("got %d results for %d queries", len(res), len(queries))
	}
	return res
}

// run1 runs one query.
func run1(t *testing.T, con Console, role Role, q string) result {
	t.Helper()
	return run(t, con, role, q)[0]
}

func decode(t *testing.T, out []byte) []result {
	t.Helper()
	var res []result
	cur := result{}
	for len(out) > 0 {
		if len(out) < 5 {
			t.Fatalf("short message %q", out)
		}
		typ := out[0]
		n := int(binary.BigEndian.Uint32(out[1:5]))
		body := out[5 : 1+n]
		out = out[1+n:]
		switch typ {
		case 'T':
			k := int(binary.BigEndian.Uint16(body))
			body = body[2:]
			for range k {
				i := bytes.IndexByte(body, 0)
				cur.cols = append(cur.cols, string(body[:i]))
				body = body[i+1:]
				cur.oids = append(cur.oids, binary.BigEndian.Uint32(body[6:10]))
				body = body[18:]
			}
		case 'D':
			k := int(binary.BigEndian.Uint16(body))
			body = body[2:]
			var row []*string
			for range k {
				l := int32(binary.BigEndian.Uint32(body))
				body = body[4:]
				if l < 0 {
					row = append(row, nil)
					continue
				}
				s := string(body[:l])
				row = append(row, &s)
				body = body[l:]
			}
			if len(row) != len(cur.cols) {
				t.Fatalf("DataRow of %d values for %d columns", len(row), len(cur.cols))
			}
			cur.rows = append(cur.rows, row)
		case 'C':
			cur.tag = string(wire.CommandTag(body))
		case 'E', 'N':
			f, err := wire.ParseErrorResponse(body)
			if err != nil {
				t.Fatal(err)
			}
			if typ == 'E' {
				cur.errs = append(cur.errs, f)
			} else {
				cur.notices = append(cur.notices, f)
			}
		case 'Z':
			cur.ready = true
			res = append(res, cur)
			cur = result{}
		default:
			t.Fatalf("unexpected message %q", typ)
		}
	}
	if cur.tag != "" || len(cur.errs) > 0 || cur.cols != nil {
		res = append(res, cur) // a reply without ReadyForQuery (the session ended)
	}
	return res
}

// wantError checks a result is exactly one ERROR with code and message.
func wantError(t *testing.T, r result, code, msg string) {
	t.Helper()
	if len(r.errs) != 1 || r.errs[0].Severity != "ERROR" || r.errs[0].Code != code || r.errs[0].Message != msg {
		t.Fatalf("want ERROR %s %q, got %+v (tag %q)", code, msg, r.errs, r.tag)
	}
	if r.tag != "" || r.cols != nil {
		t.Fatalf("an error must come alone, got tag %q cols %v", r.tag, r.cols)
	}
}

func wantOK(t *testing.T, r result, tag string) {
	t.Helper()
	if len(r.errs) > 0 {
		t.Fatalf("unexpected error %+v", r.errs)
	}
	if r.tag != tag {
		t.Fatalf("tag %q, want %q", r.tag, tag)
	}
}

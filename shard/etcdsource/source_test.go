package etcdsource

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/pgturnstile/pgturnstile/internal/etcdtest"
	"github.com/pgturnstile/pgturnstile/shard"
)

// These tests run against a real etcd member in the test's process
// (internal/etcdtest): the map applied, a bad map refused with the old one
// kept, etcd stopped and started again (the source catches up), a source
// cut off by a proxy while maps are published and the history compacted,
// and the instance records under their leases.

const prefix = "/pgt-test"

// mapDoc is a shard file whose colo's shards all live in db.
func mapDoc(db string) []byte {
	return fmt.Appendf(nil, `
[[cluster]]
name = "app"
default_database = "main"
logical_shards = 4

[[cluster.colo]]
name = "org"
key_type = "bigint"
tables = { files = "org_id" }
shards = [ { range = "0-3", database = %q } ]
`, db)
}

// pooler stands for the pooler: Apply checks a map as ApplyShardMap does
// (shard.Parse against the [databases] entries) and keeps it.
type pooler struct {
	mu   sync.Mutex
	m    *shard.Map
	rev  int64
	logs bytes.Buffer
}

func (p *pooler) apply(doc []byte, name string, rev int64) error {
	m, err := shard.Parse(doc, name, []string{"main", "s0", "s1"})
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.m, p.rev = m, rev
	p.mu.Unlock()
	return nil
}

// served is the database the map in force puts logical shard 0 on, and
// its revision.
func (p *pooler) served() (string, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		return "", 0
	}
	return p.m.Cluster("app").Colo("org").Database(0), p.rev
}

func (p *pooler) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func startSource(t *testing.T, endpoint, instance string) (*Source, *pooler) {
	t.Helper()
	p := &pooler{}
	log := slog.New(slog.NewTextHandler(lockedWriter{&p.mu, &p.logs}, nil))
	s, err := Start(Config{ClientConfig: ClientConfig{Endpoints: []string{endpoint}, DialTimeout: time.Second},
		Prefix: prefix, Instance: instance, Listen: "127.0.0.1:6432", Apply: p.apply, Log: log,
		LeaseTTL: 2 * time.Second, ProbeInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, p
}

func client(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := NewClient(ClientConfig{Endpoints: []string{endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func publish(t *testing.T, cli *clientv3.Client, doc []byte) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rev, err := Publish(ctx, cli, prefix, doc)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// eventually polls cond for up to d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool, logs ...*pooler) {
	t.Helper()
	defer func() {
		if t.Failed() {
			for _, p := range logs {
				t.Log(p.log())
			}
		}
	}()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func fleet(t *testing.T, cli *clientv3.Client) FleetStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := ReadStatus(ctx, cli, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestSourceAppliesAndRefuses(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := client(t, etcd.Endpoint())
	revA := publish(t, cli, mapDoc("s0"))
	// The map published before the start is in force when Start returns.
	src, p := startSource(t, etcd.Endpoint(), "a")
	if db, rev := p.served(); db != "s0" || rev != revA {
		t.Fatalf("after Start: serving %q at %d, want s0 at %d", db, rev, revA)
	}
	if st := src.Status(); !st.Connected || st.Revision != revA || st.Rejected != 0 {
		t.Fatalf("Status = %+v", st)
	}

	// A new map is in force well within a second.
	start := time.Now()
	revB := publish(t, cli, mapDoc("s1"))
	eventually(t, time.Second, "map B in force", func() bool { db, rev := p.served(); return db == "s1" && rev == revB })
	t.Logf("map B in force %v after its put", time.Since(start))

	// Refused: a database not in [databases], a syntax error, a broken
	// invariant, a deleted key. The map in force stays; each is counted,
	// logged with its reason, and written into the instance's record.
	bad := []struct {
		doc  []byte // nil: delete the key
		want string
	}{
		{mapDoc("nowhere"), `etcd:/pgt-test/map:11: cluster.colo.shards.database: no database`},
		{[]byte("[[cluster]\nname = 1"), "etcd:/pgt-test/map:2: expected end of table array name"},
		{bytes.Replace(mapDoc("s0"), []byte(`"0-3"`), []byte(`"0-2"`), 1), "logical shards 3 are in no range"},
		{nil, "the map's key was deleted"},
	}
	for i, b := range bad {
		var rev int64
		if b.doc == nil {
			resp, err := cli.Delete(context.Background(), MapKey(prefix))
			if err != nil {
				t.Fatal(err)
			}
			rev = resp.Header.Revision
		} else {
			rev = publish(t, cli, b.doc)
		}
		eventually(t, 2*time.Second, "refusal counted", func() bool { return src.Status().Rejected == uint64(i+1) })
		if db, served := p.served(); db != "s1" || served != revB {
			t.Fatalf("after a bad map: serving %q at %d, want s1 at %d", db, served, revB)
		}
		// The count is visible before the line is written (refuse logs
		// after it lets go of the lock), so the line is waited for too.
		logged := func() bool {
			l := p.log()
			return strings.Contains(l, fmt.Sprintf("revision %d of /pgt-test/map refused, revision %d kept", rev, revB)) && strings.Contains(l, b.want)
		}
		eventually(t, 2*time.Second, fmt.Sprintf("the log says revision %d was refused with %q", rev, b.want), logged, p)
		eventually(t, 2*time.Second, "the record names the refused revision", func() bool {
			st := fleet(t, cli)
			return len(st.Instances) == 1 && st.Instances[0].Revision == revB && st.Instances[0].RejectedRevision == rev &&
				strings.Contains(st.Instances[0].Rejected, b.want)
		})
	}
	if st := src.Status(); st.Revision != revB || !st.Connected {
		t.Fatalf("Status = %+v", st)
	}
	// And a good map after them is taken.
	revC := publish(t, cli, mapDoc("s0"))
	eventually(t, time.Second, "map C in force", func() bool { db, rev := p.served(); return db == "s0" && rev == revC })
}

func TestSourceCatchesUpAfterEtcdRestart(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := client(t, etcd.Endpoint())
	revA := publish(t, cli, mapDoc("s0"))
	src, p := startSource(t, etcd.Endpoint(), "a")
	if _, rev := p.served(); rev != revA {
		t.Fatalf("serving %d, want %d", rev, revA)
	}
	etcd.Stop()
	eventually(t, 5*time.Second, "the source says it lost etcd", func() bool { return !src.Status().Connected })
	eventually(t, time.Second, "the loss is logged", func() bool {
		return strings.Contains(p.log(), "lost etcd") && strings.Contains(p.log(), fmt.Sprintf("serving revision %d until it is back", revA))
	})
	// The map in force stays.
	if db, rev := p.served(); db != "s0" || rev != revA || src.Status().Revision != revA {
		t.Fatalf("without etcd: serving %q at %d", db, rev)
	}
	etcd.Restart()
	eventually(t, 5*time.Second, "the source is back", func() bool { return src.Status().Connected })
	revB := publish(t, cli, mapDoc("s1"))
	eventually(t, 2*time.Second, "map B in force", func() bool { db, rev := p.served(); return db == "s1" && rev == revB })
	if !strings.Contains(p.log(), "etcd is back") {
		t.Fatalf("log:\n%s", p.log())
	}
	// Its record was published again (a new lease) with the new revision.
	eventually(t, 2*time.Second, "record at B", func() bool {
		st := fleet(t, cli)
		return len(st.Instances) == 1 && st.Instances[0].ID == "a" && st.Instances[0].Revision == revB && st.Converged()
	})
}

// cutProxy forwards TCP to target until cut; while cut it refuses and
// drops every connection.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

func startProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			cut := p.cut
			p.mu.Unlock()
			if cut {
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

func (p *cutProxy) endpoint() string { return "http://" + p.ln.Addr().String() }

// A source cut off from etcd while two maps are published and the history
// is compacted past them catches up to the last one when it is back.
func TestSourceCatchesUpAfterPartitionAndCompaction(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := client(t, etcd.Endpoint())
	revA := publish(t, cli, mapDoc("s0"))
	proxy := startProxy(t, strings.TrimPrefix(etcd.Endpoint(), "http://"))
	src, p := startSource(t, proxy.endpoint(), "a")
	if _, rev := p.served(); rev != revA {
		t.Fatalf("serving %d, want %d", rev, revA)
	}
	proxy.setCut(true)
	eventually(t, 5*time.Second, "the source says it lost etcd", func() bool { return !src.Status().Connected }, p)
	publish(t, cli, mapDoc("s1"))
	revC := publish(t, cli, mapDoc("s1"))
	if _, err := cli.Compact(context.Background(), revC); err != nil {
		t.Fatal(err)
	}
	if db, rev := p.served(); db != "s0" || rev != revA {
		t.Fatalf("cut off: serving %q at %d", db, rev)
	}
	proxy.setCut(false)
	eventually(t, 5*time.Second, "caught up to C", func() bool { db, rev := p.served(); return db == "s1" && rev == revC })
	if !src.Status().Connected {
		t.Fatal("not connected after catching up")
	}
}

// Each instance's record lives under its lease: two sources both publish
// the revision they serve and see each other's; a closed one's record
// vanishes at once, and a killed one's (no revoke) when its lease expires.
func TestSourceInstancesUnderLease(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := client(t, etcd.Endpoint())
	rev := publish(t, cli, mapDoc("s0"))
	a, _ := startSource(t, etcd.Endpoint(), "a")
	b, _ := startSource(t, etcd.Endpoint(), "b")
	eventually(t, 2*time.Second, "both records at the map's revision", func() bool {
		st := fleet(t, cli)
		return st.MapRevision == rev && len(st.Instances) == 2 && st.Converged()
	})
	st := fleet(t, cli)
	if in := st.Instances[0]; in.ID != "a" || in.Listen != "127.0.0.1:6432" || in.Host == "" || in.PID == 0 || in.Time.IsZero() {
		t.Fatalf("record: %+v", in)
	}
	eventually(t, 2*time.Second, "each source sees both", func() bool {
		return len(a.Instances()) == 2 && len(b.Instances()) == 2 && b.Instances()[0].Revision == rev
	})
	rev2 := publish(t, cli, mapDoc("s1"))
	eventually(t, 2*time.Second, "the fleet converged on the new map", func() bool {
		st := fleet(t, cli)
		return st.MapRevision == rev2 && st.Converged()
	})

	// Closed: the lease is revoked, the record goes now.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if st := fleet(t, cli); len(st.Instances) != 1 || st.Instances[0].ID != "a" {
		t.Fatalf("after b closed: %+v", st.Instances)
	}
	eventually(t, 2*time.Second, "a sees b gone", func() bool { return len(a.Instances()) == 1 })

	// Died without a word: its lease (2 s here) expires.
	a.cancel()
	<-a.done
	time.Sleep(100 * time.Millisecond)
	if st := fleet(t, cli); len(st.Instances) != 1 {
		t.Fatalf("right after a died: %+v", st.Instances)
	}
	eventually(t, 6*time.Second, "a's record expired with its lease", func() bool { return len(fleet(t, cli).Instances) == 0 })
}

// With nothing published, the source starts and waits; the first map
// published is applied.
func TestSourceStartsWithoutMap(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := client(t, etcd.Endpoint())
	src, p := startSource(t, etcd.Endpoint(), "a")
	if st := src.Status(); !st.Connected || st.Revision != 0 {
		t.Fatalf("Status = %+v", st)
	}
	if !strings.Contains(p.log(), "no map at /pgt-test/map yet") {
		t.Fatalf("log:\n%s", p.log())
	}
	rev := publish(t, cli, mapDoc("s1"))
	eventually(t, time.Second, "map in force", func() bool { _, r := p.served(); return r == rev })
}

// With etcd unreachable at the start, Start returns (after DialTimeout
// at most) and the map arrives when etcd does.
func TestSourceStartsWithoutEtcd(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := client(t, etcd.Endpoint())
	rev := publish(t, cli, mapDoc("s1"))
	etcd.Stop()
	t0 := time.Now()
	src, p := startSource(t, etcd.Endpoint(), "a")
	if d := time.Since(t0); d > 3*time.Second {
		t.Fatalf("Start took %v with etcd away", d)
	}
	if st := src.Status(); st.Connected || st.Revision != 0 {
		t.Fatalf("Status = %+v", st)
	}
	etcd.Restart()
	eventually(t, 5*time.Second, "map in force once etcd is up", func() bool { _, r := p.served(); return r == rev })
}

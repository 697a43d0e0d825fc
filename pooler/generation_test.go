package pooler

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/config"
)

// genSetting is one of the two configurations TestReloadNeverMixes
// alternates between: they differ in the admission policy (its file) and
// in pool settings (pool_size, query_timeout, query_wait_timeout).
type genSetting struct {
	file                     string
	poolSize                 int
	queryTimeout, queryWait  time.Duration
	policyText, settingsText string
}

// TestReloadNeverMixes runs transactions on concurrent clients while
// RELOADs alternate between two configurations that differ in both the
// admission policy and the pool's settings. Every transaction, while it
// holds its server, must find that the policy it was admitted under and
// the settings it runs by are of one configuration, and every gate the
// pool builds must be built from one configuration.
func TestReloadNeverMixes(t *testing.T) {
	dir := t.TempDir()
	gens := [2]genSetting{
		{file: filepath.Join(dir, "a.toml"), poolSize: 4, queryTimeout: 101 * time.Second, queryWait: 11 * time.Second,
			policyText: "[priorities]\nnames = [\"a-hi\", \"a-lo\"]\ndefault = \"a-hi\"\n"},
		{file: filepath.Join(dir, "b.toml"), poolSize: 6, queryTimeout: 202 * time.Second, queryWait: 22 * time.Second,
			policyText: "[priorities]\nnames = [\"b-hi\", \"b-mid\", \"b-lo\"]\ndefault = \"b-mid\"\n"},
	}
	for i := range gens {
		g := &gens[i]
		if err := os.WriteFile(g.file, []byte(g.policyText), 0o600); err != nil {
			t.Fatal(err)
		}
		g.settingsText = fmt.Sprintf("admission_file = %s\ndefault_pool_size = %d\nquery_timeout = %d\nquery_wait_timeout = %d\n",
			g.file, g.poolSize, int(g.queryTimeout/time.Second), int(g.queryWait/time.Second))
	}
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"gdb": "pool_mode=transaction"}, gens[0].settingsText)
	defer tp.shutdown(t, fake)
	// The same [databases] with each generation's settings, parsed as
	// RELOAD would read them.
	var cfgs [2]*config.Config
	for i := range gens {
		ini := fmt.Sprintf("[databases]\ngdb = host=127.0.0.1 port=%d dbname=fake pool_mode=transaction\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = 0\n%s%s",
			fake.port(), testPoolerSettings, gens[i].settingsText)
		cfg, err := config.Parse("test.ini", []byte(ini))
		if err != nil {
			t.Fatal(err)
		}
		cfgs[i] = cfg
	}
	// The configuration a policy file, a pool size or a timeout belongs
	// to (-1: neither).
	index := func(match func(g genSetting) bool) int {
		for i, g := range gens {
			if match(g) {
				return i
			}
		}
		return -1
	}
	byFile := func(f string) int { return index(func(g genSetting) bool { return g.file == f }) }
	bySize := func(n int) int { return index(func(g genSetting) bool { return g.poolSize == n }) }
	byWait := func(d time.Duration) int { return index(func(g genSetting) bool { return g.queryWait == d }) }
	byTimeout := func(d time.Duration) int { return index(func(g genSetting) bool { return g.queryTimeout == d }) }

	const clients, txns = 8, 150
	var (
		txMixes, gateMixes, seen, sheds atomic.Int64
		mu                              sync.Mutex
		report                          []string
	)
	mixed := func(n *atomic.Int64, format string, args ...any) {
		n.Add(1)
		mu.Lock()
		if len(report) < 10 {
			report = append(report, fmt.Sprintf(format, args...))
		}
		mu.Unlock()
	}
	done := make(chan struct{})
	var bg sync.WaitGroup
	// RELOAD, alternating, until the clients are done.
	reloads := 0
	bg.Add(1)
	go func() {
		defer bg.Done()
		for i := 1; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if err := tp.svc.Apply(cfgs[i%2], true); err != nil {
				mixed(&txMixes, "RELOAD failed: %v", err)
				return
			}
			reloads++
		}
	}()
	// Every gate the pool holds is built from one configuration.
	bg.Add(1)
	go func() {
		defer bg.Done()
		var last *poolGate
		for {
			select {
			case <-done:
				return
			default:
			}
			p := tp.poolOf("gdb")
			if p == nil {
				time.Sleep(time.Millisecond)
				continue
			}
			p.mu.Lock()
			pg := p.gate
			p.mu.Unlock()
			if pg == nil || pg == last {
				continue
			}
			last = pg
			if f := byFile(pg.policy.file); f == -1 || f != bySize(pg.poolSize) || f != byWait(pg.maxWait) {
				mixed(&gateMixes, "a gate built from policy %s with pool_size %d and query_wait_timeout %v", filepath.Base(pg.policy.file), pg.poolSize, pg.maxWait)
			}
		}
	}()

	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- runGenerationClient(tp, txns, &sheds, func(c *client) {
				file, st := observeLink(c)
				seen.Add(1)
				if f := byFile(file); f == -1 || f != byTimeout(st.QueryTimeout) || f != byWait(st.QueryWaitTimeout) {
					mixed(&txMixes, "a transaction admitted under policy %s ran by query_timeout %v, query_wait_timeout %v", filepath.Base(file), st.QueryTimeout, st.QueryWaitTimeout)
				}
			})
		}()
	}
	wg.Wait()
	close(done)
	bg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d transactions observed, %d shed, %d RELOADs", seen.Load(), sheds.Load(), reloads)
	if tx, g := txMixes.Load(), gateMixes.Load(); tx+g > 0 {
		t.Fatalf("%d transactions and %d gates mixed two configurations, the first:\n%s", tx, g, strings.Join(report, "\n"))
	}
	if seen.Load() != clients*txns {
		t.Fatalf("observed %d transactions, want %d", seen.Load(), clients*txns)
	}
}

// errGenShed is a transaction the admission gate refused.
var errGenShed = errors.New("shed")

// observeLink is what the linked transaction of c runs under: the file of
// its admission policy and its settings.
func observeLink(c *client) (policyFile string, st *config.Settings) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.link.mu.gen.adm.file, c.linkSettings()
}

// runGenerationClient logs in to database gdb and runs n transactions
// (BEGIN; SELECT 1; COMMIT), calling observe while each holds its server.
func runGenerationClient(tp *testPooler, n int, sheds *atomic.Int64, observe func(*client)) error {
	conn, err := net.Dial("tcp", tp.addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second)) // a failsafe
	br := newBackendReader(conn)
	var key []byte
	var errShed error
	untilReady := func(step string) error {
		errShed = nil
		for {
			typ, body, err := br.next()
			if err != nil {
				return fmt.Errorf("%s: %v", step, err)
			}
			switch typ {
			case 'E':
				if strings.Contains(string(body), "\x00C53000\x00") {
					errShed = errGenShed
					continue
				}
				return fmt.Errorf("%s: error %q", step, body)
			case 'K':
				key = append([]byte(nil), body...)
			case 'Z':
				return errShed
			}
		}
	}
	query := func(q string) error {
		m := append([]byte{'Q', 0, 0, 0, 0}, q+"\x00"...)
		binary.BigEndian.PutUint32(m[1:], uint32(len(m)-1))
		if _, err := conn.Write(m); err != nil {
			return err
		}
		return untilReady(q)
	}
	if _, err := conn.Write(startupPacket(0, [][2]string{{"user", "gu"}, {"database", "gdb"}})); err != nil {
		return err
	}
	if err := untilReady("login"); err != nil {
		return err
	}
	c := tp.clientByKey(key)
	if c == nil {
		return errors.New("the pooler has no client with the key it sent")
	}
	for i := 0; i < n; {
		if err := query("BEGIN"); err == errGenShed {
			sheds.Add(1) // the gates are rebuilt at every RELOAD
			continue
		} else if err != nil {
			return err
		}
		i++
		if !c.linkedForTest() {
			return errors.New("no server linked inside a transaction")
		}
		observe(c)
		if err := query("SELECT 1"); err != nil {
			return err
		}
		if err := query("COMMIT"); err != nil {
			return err
		}
	}
	return nil
}

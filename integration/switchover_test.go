//go:build linux

package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// swTx is one transaction of a switchover client: when it was begun and
// ended (client side), the port of the Postgres it ran on, its error.
type swTx struct {
	start, end time.Time
	port       int
	err        error
}

// swClients are clients looping transactions that each ask Postgres for
// its port and sleep a little (client i sleeps (i+1)*10 ms, so some
// transaction is always in flight), until stop.
type swClients struct {
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	txs  [][]swTx
}

func startSwClients(connstr string, n int) *swClients {
	sc := &swClients{stop: make(chan struct{}), txs: make([][]swTx, n)}
	for i := 0; i < n; i++ {
		sc.wg.Add(1)
		go sc.run(i, connstr, fmt.Sprintf("SELECT pg_sleep(%g)", float64(i+1)*0.01))
	}
	return sc
}

func (sc *swClients) run(i int, connstr, sleep string) {
	defer sc.wg.Done()
	record := func(tx swTx) {
		sc.mu.Lock()
		sc.txs[i] = append(sc.txs[i], tx)
		sc.mu.Unlock()
	}
	cfg, err := pgx.ParseConfig(connstr)
	if err != nil {
		record(swTx{err: err})
		return
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		record(swTx{err: err})
		return
	}
	defer conn.Close(context.Background())
	for {
		select {
		case <-sc.stop:
			return
		default:
		}
		tx := swTx{start: time.Now()}
		tx.err = pgx.BeginFunc(ctx, conn, func(t pgx.Tx) error {
			if err := t.QueryRow(ctx, "SELECT inet_server_port()").Scan(&tx.port); err != nil {
				return err
			}
			_, err := t.Exec(ctx, sleep)
			return err
		})
		tx.end = time.Now()
		record(tx)
		if tx.err != nil {
			return
		}
	}
}

// waitEach waits until every client has ended n transactions begun after
// since.
func (sc *swClients) waitEach(t *testing.T, n int, since time.Time) {
	t.Helper()
	waitFor(t, 20*time.Second, fmt.Sprintf("every client to end %d transactions", n), func() bool {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		for _, txs := range sc.txs {
			k := 0
			for _, tx := range txs {
				if tx.err != nil {
					return true // reported by finish
				}
				if tx.start.After(since) {
					k++
				}
			}
			if k < n {
				return false
			}
		}
		return true
	})
}

// finish stops the clients and returns every transaction, failing the test
// for each error.
func (sc *swClients) finish(t *testing.T) []swTx {
	t.Helper()
	select {
	case <-sc.stop:
	default:
		close(sc.stop)
	}
	sc.wg.Wait()
	var all []swTx
	for i, txs := range sc.txs {
		for _, tx := range txs {
			if tx.err != nil {
				t.Errorf("client %d: transaction begun at %v failed: %v", i, tx.start.Format("15:04:05.000"), tx.err)
			}
			all = append(all, tx)
		}
	}
	return all
}

// longestInFlight is the duration of the longest transaction in flight at
// at (begun before, ended after).
func longestInFlight(txs []swTx, at time.Time) (d time.Duration, n int) {
	for _, tx := range txs {
		if tx.start.Before(at) && tx.end.After(at) {
			n++
			if l := tx.end.Sub(tx.start); l > d {
				d = l
			}
		}
	}
	return d, n
}

// TestSwitchover (seed 003): moving a database to another Postgres under
// clients looping transactions, with no client error. With PAUSE db,
// rewrite host/port, RELOAD, RESUME db the transactions after RESUME run
// on the new cluster and the pause lasts about as long as the longest
// transaction in flight when it began; with RELOAD alone the transactions
// in flight finish on the old cluster and the new ones go to the new one.
func TestSwitchover(t *testing.T) {
	needPG(t)
	second := startSecondCluster(t)
	const clients = 8
	ini := func(port int) string {
		return iniSettings(withConsoleUsers(nil),
			fmt.Sprintf("[databases]\nsw = host=127.0.0.1 port=%d dbname=%s\n", port, appDB))
	}
	oldPort, newPort := pg.port, second.port

	t.Run("pause-reload-resume", func(t *testing.T) {
		p := startPooler(t, ini(oldPort), opsUserlist)
		admin := adminConsole(t, p)
		sc := startSwClients(p.ConnString("sw", appUser, appPassword), clients)
		defer sc.finish(t)
		sc.waitEach(t, 3, time.Time{})

		pauseStart := time.Now()
		adminExec(t, admin, "PAUSE sw")
		pauseDone := time.Now()
		p.WriteConfig(ini(newPort), opsUserlist)
		adminExec(t, admin, "RELOAD")
		adminExec(t, admin, "RESUME sw")
		resumed := time.Now()
		sc.waitEach(t, 3, resumed)
		txs := sc.finish(t)

		longest, inFlight := longestInFlight(txs, pauseStart)
		t.Logf("PAUSE took %v with %d transactions in flight, the longest %v; clients waited %v from PAUSE to RESUME; %d transactions in all",
			pauseDone.Sub(pauseStart), inFlight, longest, resumed.Sub(pauseStart), len(txs))
		var onOld, onNew int
		for _, tx := range txs {
			switch {
			case tx.err != nil:
			case tx.start.After(pauseDone) && tx.port != newPort:
				t.Errorf("transaction begun at +%v (after PAUSE returned) ran on port %d, want the new cluster's %d",
					tx.start.Sub(pauseStart), tx.port, newPort)
			case tx.end.Before(pauseStart) && tx.port != oldPort:
				t.Errorf("transaction before PAUSE ran on port %d, want %d", tx.port, oldPort)
			}
			if tx.port == oldPort {
				onOld++
			} else if tx.port == newPort {
				onNew++
			}
		}
		t.Logf("%d transactions on the old cluster, %d on the new", onOld, onNew)
		if onOld == 0 || onNew == 0 {
			t.Errorf("transactions: %d on the old cluster, %d on the new; want both", onOld, onNew)
		}
	})

	t.Run("reload-alone", func(t *testing.T) {
		p := startPooler(t, ini(oldPort), opsUserlist)
		admin := adminConsole(t, p)
		sc := startSwClients(p.ConnString("sw", appUser, appPassword), clients)
		defer sc.finish(t)
		// One transaction surely open across the RELOAD.
		open := connectPgx(t, p.ConnString("sw", appUser, appPassword))
		if _, err := open.Exec(ctxT(t, 10*time.Second), "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if port := queryInt(t, open, "SELECT inet_server_port()"); int(port) != oldPort {
			t.Fatalf("open transaction on port %d, want %d", port, oldPort)
		}
		sc.waitEach(t, 3, time.Time{})

		p.WriteConfig(ini(newPort), opsUserlist)
		reloadStart := time.Now()
		adminExec(t, admin, "RELOAD")
		reloaded := time.Now()
		if port := queryInt(t, open, "SELECT inet_server_port()"); int(port) != oldPort {
			t.Errorf("transaction open at RELOAD moved to port %d, want the old cluster's %d", port, oldPort)
		}
		if _, err := open.Exec(ctxT(t, 10*time.Second), "COMMIT"); err != nil {
			t.Fatalf("COMMIT of the transaction open at RELOAD: %v", err)
		}
		if port := queryInt(t, open, "SELECT inet_server_port()"); int(port) != newPort {
			t.Errorf("after its COMMIT: port %d, want the new cluster's %d", port, newPort)
		}
		sc.waitEach(t, 3, reloaded)
		txs := sc.finish(t)

		var inFlightOld, inFlight, afterOld int
		for _, tx := range txs {
			switch {
			case tx.err != nil:
			case tx.start.After(reloaded):
				if tx.port != newPort {
					afterOld++
					t.Errorf("transaction begun +%v after RELOAD returned ran on port %d, want the new cluster's %d",
						tx.start.Sub(reloaded), tx.port, newPort)
				}
			case tx.end.After(reloadStart):
				inFlight++
				if tx.port == oldPort {
					inFlightOld++
				}
			}
		}
		t.Logf("RELOAD took %v; %d looping transactions in flight across it (%d finished on the old cluster); %d transactions in all",
			reloaded.Sub(reloadStart), inFlight, inFlightOld, len(txs))
	})
}

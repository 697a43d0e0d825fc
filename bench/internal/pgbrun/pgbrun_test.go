//go:build linux

package pgbrun

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseStatTicks(t *testing.T) {
	// comm with a space and a parenthesis, as /proc allows.
	line := "1234 (pg (bench) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 8 0 12345 1000000 500 18446744073709551615\n"
	n, err := ParseStatTicks(line)
	if err != nil {
		t.Fatal(err)
	}
	if n != 325 {
		t.Fatalf("ticks = %d, want 250+75", n)
	}
	if _, err := ParseStatTicks("garbage"); err == nil {
		t.Fatal("no error for a line without comm")
	}
}

func TestPercentile(t *testing.T) {
	xs := make([]int64, 100)
	for i := range xs {
		xs[i] = int64(i + 1)
	}
	for _, c := range []struct {
		p    float64
		want int64
	}{{50, 50}, {99, 99}, {100, 100}, {1, 1}, {0, 1}} {
		if got := Percentile(xs, c.p); got != c.want {
			t.Errorf("p%v = %d, want %d", c.p, got, c.want)
		}
	}
	if got := Percentile([]int64{7}, 99); got != 7 {
		t.Errorf("p99 of one = %d", got)
	}
}

func TestParseLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pgbench_log.1")
	// pgbench 15 format; a failed transaction has "failed" for its time.
	log := "0 0 512 0 1700000000 100\n1 0 1024 0 1700000000 200\n0 1 failed 0 1700000001 5\n"
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	txns, err := ReadLogs(filepath.Join(dir, "pgbench_log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(txns) != 2 || txns[0] != (Txn{End: 1700000000000100, Lat: 512}) || txns[1].Lat != 1024 {
		t.Fatalf("txns = %+v", txns)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("log not removed after reading: %v", err)
	}
	if err := os.WriteFile(path, []byte("0 0 12\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLogs(filepath.Join(dir, "pgbench_log")); err == nil {
		t.Error("no error for a short line")
	}
}

// TestMeasure: transactions every 1 ms for 5 s and a pooler that burns one
// tick per 10 ms sampled every 50 ms: the window leaves out the first
// second and the last 0.2 s, and CPU per transaction is exact.

func TestFailure(t *testing.T) {
	ok := Output{Txns: []Txn{{End: 1, Lat: 1}}}
	if why, short := ok.Failure(time.Second); why != "" || short {
		t.Errorf("clean run: %q %v", why, short)
	}
	empty := Output{ConnectMs: 1234}
	if why, short := empty.Failure(time.Second); !short || !strings.Contains(why, "1234 ms") {
		t.Errorf("no transactions: %q %v", why, short)
	}
	failed := Output{Failed: 3, Stderr: "noise\npgbench: error: client 1 aborted\n", Txns: ok.Txns}
	if why, short := failed.Failure(time.Second); short || why != "3 failed transactions: pgbench: error: client 1 aborted" {
		t.Errorf("failed transactions: %q %v", why, short)
	}
	hung := Output{TimedOut: true, RunErr: errors.New("killed")}
	if why, _ := hung.Failure(7 * time.Second); !strings.Contains(why, "-T 7s: killed") {
		t.Errorf("hang: %q", why)
	}
}

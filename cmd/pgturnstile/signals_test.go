//go:build unix

package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/pooler"
)

// SIGUSR1 then SIGUSR2 (kill -USR1 $P; kill -USR2 $P) leaves the pooler
// running: the signals act in the order they came, so the RESUME undoes
// the PAUSE and never runs before it. Each round waits until every
// goroutine the handler started has ended, then reads the state.
func TestPauseResumeSignalsInOrder(t *testing.T) {
	cfg, err := config.Parse("t.ini", []byte("[databases]\ndb = host=127.0.0.1 port=1\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = 0\nunix_socket_dir =\n"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := pooler.New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()
	for round := range 30 {
		sigs := make(chan os.Signal, 2)
		sigs <- sigPause
		sigs <- sigResume
		close(sigs)
		handleSignals(context.Background(), sigs, svc, log, &notifier{}, false, func() {})
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
			runtime.Gosched()
		}
		if st := svc.Console().State(); st.Paused || !st.Active {
			t.Fatalf("round %d: after SIGUSR1 then SIGUSR2 the pooler is %+v, want active", round, st)
		}
	}
}

//go:build unix

package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/pooler"
)

// RELOAD resets syslog as PgBouncer's reset_logging: off at start and
// turned on by a RELOAD, lines go there with the new ident; turned off,
// nothing more goes there. A line about a client carries its prefix there
// too.
func TestSyslogFollowsReload(t *testing.T) {
	conn := fakeSyslog(t)

	var local bytes.Buffer
	st := config.Settings{SyslogIdent: "before", SyslogFacility: "daemon"}
	log, sink := withSyslog(slog.New(newHandler(&local, 0)), &st)
	defer sink.Close()
	log.Info("while off")

	st.Syslog, st.SyslogIdent = true, "after"
	sink.reset(log, &st)
	log.Info("while on", pooler.LogKeyConn, "C-1", pooler.LogKeyDB, "db", pooler.LogKeyUser, "u", pooler.LogKeyAddr, "unix")
	buf := make([]byte, 2048)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no syslog line after the reset: %v", err)
	}
	if got := strings.TrimSuffix(string(buf[:n]), "\n"); !strings.Contains(got, " after[") || !strings.HasSuffix(got, "]: C-1: db/u@unix while on") {
		t.Errorf("syslog line %q, want ident after and the client's prefix", got)
	}

	st.Syslog = false
	sink.reset(log, &st)
	log.Info("off again")
	conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := conn.Read(buf); err == nil {
		t.Errorf("syslog line %q while syslog is off", buf[:n])
	}
	for _, s := range []string{"while off", "while on", "off again"} {
		if !strings.Contains(local.String(), s) {
			t.Errorf("local log lacks %q", s)
		}
	}
}

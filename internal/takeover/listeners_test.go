//go:build !windows

package takeover

import (
	"encoding/json"
	"net"
	"path/filepath"
	"testing"

	"github.com/pgturnstile/pgturnstile/admin"
)

// TestListenerRows: a listener's SHOW FDS row says what CheckRow and
// fdcheck expect of it, and carries a descriptor only when passed.
func TestListenerRows(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	unix, err := net.Listen("unix", filepath.Join(t.TempDir(), ".s.PGSQL.6432"))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close()
	port := tcp.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		name    string
		row     func(pass bool) admin.FD
		id      uint64
		addr    string
		port    int
		network string
		metrics bool
	}{
		{"tcp", func(pass bool) admin.FD { return ListenerRow(0, tcp, 6432, pass) }, ListenerID, "127.0.0.1", port, "tcp", false},
		{"unix", func(pass bool) admin.FD { return ListenerRow(1, unix, 6432, pass) }, ListenerID | 1, "unix", 6432, "unix", false},
		{"metrics", func(pass bool) admin.FD { return MetricsRow(tcp, pass) }, MetricsID, "127.0.0.1", port, "tcp", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.row(false)
			if r.FD != -1 || r.ID != tc.id || r.Task != "pooler" || r.Addr != tc.addr || r.Port != tc.port {
				t.Errorf("row = %+v", r)
			}
			var st State
			if err := json.Unmarshal([]byte(r.State), &st); err != nil {
				t.Fatal(err)
			}
			if st.Network != tc.network || st.Metrics != tc.metrics {
				t.Errorf("state = %+v", st)
			}
			if err := CheckRow("pooler", nil, st); err != nil {
				t.Errorf("CheckRow: %v", err)
			}
			passed := tc.row(true)
			if passed.FD < 0 {
				t.Fatal("passed without a descriptor")
			}
			Close(passed.FD)
		})
	}
}

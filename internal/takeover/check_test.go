//go:build !windows

package takeover

import (
	"strings"
	"testing"

	"github.com/pgturnstile/pgturnstile/config"
)

// TestCheckLinks: the links of SHOW FDS's rows are taken only as SUSPEND
// makes them, a session client and its server naming each other; a
// forged link refuses the takeover.
func TestCheckLinks(t *testing.T) {
	client := func(fd, link int) Row {
		return Row{User: "app", Database: "appdb", OldFD: fd, Link: link}
	}
	server := func(fd, link int) Row {
		return Row{User: "app", Database: "appdb", OldFD: fd, Link: link}
	}
	for _, tc := range []struct {
		name             string
		clients, servers []Row
		err              string // "" when accepted
	}{
		{"none linked", []Row{client(10, 0)}, []Row{server(11, 0)}, ""},
		{"a linked pair", []Row{client(10, 11), client(12, 0)}, []Row{server(11, 10), server(13, 0)}, ""},
		{"two pairs", []Row{client(10, 11), client(12, 13)}, []Row{server(11, 10), server(13, 12)}, ""},
		{"a link to no row", []Row{client(10, 99)}, []Row{server(11, 10)}, "no server row"},
		{"a client linked to a client", []Row{client(10, 12), client(12, 10)}, nil, "no server row"},
		{"a server linked to two clients", []Row{client(10, 11), client(12, 11)}, []Row{server(11, 10)}, "two clients"},
		{"a link not returned", []Row{client(10, 11)}, []Row{server(11, 0)}, "linked to 0"},
		{"a server linked to another client", []Row{client(10, 11), client(12, 0)}, []Row{server(11, 12)}, "linked to 12"},
		{"a server linked alone", []Row{client(10, 0)}, []Row{server(11, 10)}, "no client row linked to it"},
		{"a server linked to no row", nil, []Row{server(11, 50)}, "no client row linked to it"},
		{"two rows, one descriptor", []Row{client(11, 0)}, []Row{server(11, 0)}, "two rows with descriptor 11"},
		{"a pair across databases", []Row{client(10, 11)},
			[]Row{{User: "app", Database: "other", OldFD: 11, Link: 10}}, "linked to a server of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &Handover{Clients: tc.clients, Servers: tc.servers}
			err := h.checkLinks()
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.err != "" && err == nil:
				t.Errorf("accepted, want an error with %q", tc.err)
			case tc.err != "" && !strings.Contains(err.Error(), tc.err):
				t.Errorf("error %q, want one with %q", err, tc.err)
			}
		})
	}
}

// TestRowLink: a row's fd and link columns.
func TestRowLink(t *testing.T) {
	for _, tc := range []struct {
		task, fd, link string
		noLink         bool
		wantFD, want   int
		ok             bool
	}{
		{"client", "10", "11", false, 10, 11, true},
		{"server", "11", "0", false, 11, 0, true},
		{"client", "10", "", true, 10, 0, true},
		{"pooler", "3", "0", false, 3, 0, true},
		{"pooler", "3", "4", false, 0, 0, false},
		{"client", "x", "0", false, 0, 0, false},
		{"client", "-1", "0", false, 0, 0, false},
		{"client", "10", "-5", false, 0, 0, false},
		{"client", "10", "4x", false, 0, 0, false},
	} {
		row := map[string]string{"fd": tc.fd, "link": tc.link}
		if tc.noLink {
			delete(row, "link")
		}
		fd, link, err := rowLink(tc.task, row)
		if (err == nil) != tc.ok || tc.ok && (fd != tc.wantFD || link != tc.want) {
			t.Errorf("rowLink(%s, fd=%q link=%q) = %d, %d, %v", tc.task, tc.fd, tc.link, fd, link, err)
		}
	}
}

// TestCheckLinked: a client that comes linked to a server must be a
// session-mode client here, and its pool's servers must log in as the
// server's user.
func TestCheckLinked(t *testing.T) {
	cfg, err := config.Parse("test.ini", []byte(`[databases]
sess = host=127.0.0.1 dbname=app pool_mode=session
tx = host=127.0.0.1 dbname=app pool_mode=transaction
forced = host=127.0.0.1 dbname=app user=owner pool_mode=session
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = 0
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		db, clientUser, serverUser string
		err                        string
	}{
		{"sess", "app", "app", ""},
		{"tx", "app", "app", "pool_mode transaction"},
		{"sess", "app", "other", `user "other", not "app"`},
		{"forced", "app", "owner", ""},
		{"forced", "app", "app", `user "app", not "owner"`},
	} {
		m := Row{User: tc.clientUser, Database: tc.db, Link: 11}
		srv := Row{User: tc.serverUser, Database: tc.db, OldFD: 11, Link: 10}
		err := checkLinked(cfg, m, srv)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s %s/%s: refused: %v", tc.db, tc.clientUser, tc.serverUser, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s %s/%s: %v, want an error with %q", tc.db, tc.clientUser, tc.serverUser, err, tc.err)
		}
	}
}

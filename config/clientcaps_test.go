package config

import (
	"strings"
	"testing"
)

func TestClientCaps(t *testing.T) {
	c := mustParse(t, `[pgbouncer]
max_db_client_connections = 10
max_user_client_connections = 4

[databases]
plain  =
capped = max_db_client_connections=2
zero   = max_db_client_connections=0
*      = max_db_client_connections=7

[users]
alice = max_user_client_connections=2
bob   = max_user_client_connections=0
`)
	for _, w := range c.Warnings {
		if strings.Contains(w, "client_connections") {
			t.Errorf("warning for a supported key: %s", w)
		}
	}
	auto, _ := c.LookupDatabase("tenant")
	for _, tt := range []struct {
		name string
		db   *Database
		want int
	}{
		{"global", c.Databases["plain"], 10},
		{"own", c.Databases["capped"], 2},
		// A per-database 0 falls back to the global value.
		{"zero", c.Databases["zero"], 10},
		{"auto-database from *", auto, 7},
		{"admin console", nil, 10},
	} {
		if got := c.MaxDBClients(tt.db); got != tt.want {
			t.Errorf("MaxDBClients(%s) = %d, want %d", tt.name, got, tt.want)
		}
	}
	for user, want := range map[string]int{"alice": 2, "bob": 4, "nobody": 4} {
		if got := c.MaxUserClients(user); got != want {
			t.Errorf("MaxUserClients(%s) = %d, want %d", user, got, want)
		}
	}
	// SET (the console) changes the global values.
	if err := c.Set("max_db_client_connections", "3"); err != nil {
		t.Fatal(err)
	}
	if err := c.Set("max_user_client_connections", "0"); err != nil {
		t.Fatal(err)
	}
	if got := c.MaxDBClients(c.Databases["plain"]); got != 3 {
		t.Errorf("after SET, MaxDBClients(plain) = %d, want 3", got)
	}
	if got := c.MaxUserClients("bob"); got != 0 {
		t.Errorf("after SET, MaxUserClients(bob) = %d, want 0 (unlimited)", got)
	}
	if got := c.MaxUserClients("alice"); got != 2 {
		t.Errorf("after SET, MaxUserClients(alice) = %d, want 2", got)
	}
}

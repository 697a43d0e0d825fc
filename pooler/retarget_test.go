package pooler

import (
	"errors"
	"testing"

	"github.com/pgturnstile/pgturnstile/config"
)

// TestRetarget: an entry whose servers would differ dooms every server of
// the pool with PgBouncer's reason and forgets the old target's login
// error; one that changes only what applies to the servers a pool has
// (pool sizes) dooms nothing; a forced user's new password logs the next
// servers in.
func TestRetarget(t *testing.T) {
	p := benchPool(t, 3)
	old := p.dbEntry()
	p.mu.Lock()
	p.servers = map[*server]struct{}{}
	for _, s := range p.idle {
		p.servers[s] = struct{}{}
	}
	p.lastLoginErr = errors.New("connection refused")
	p.mu.Unlock()

	resized := *old
	resized.PoolSize = 7
	if p.retarget(&resized) {
		t.Fatal("a changed pool_size retargeted the pool")
	}
	if p.dbEntry() != &resized {
		t.Error("the pool does not hold the new entry")
	}
	for s := range p.servers {
		if s.closeNeeded {
			t.Fatalf("%s doomed by a pool_size change", s)
		}
	}

	moved := resized
	moved.Port = 6543
	if !p.retarget(&moved) {
		t.Fatal("a changed port did not retarget the pool")
	}
	if got := p.target.Load().endpoints[0].address; got != "127.0.0.1:6543" {
		t.Errorf("target address %s, want 127.0.0.1:6543", got)
	}
	p.mu.Lock()
	for s := range p.servers {
		if !s.closeNeeded || s.doomReason != reasonConfigChanged {
			t.Errorf("%s after retarget: closeNeeded %v, reason %q", s, s.closeNeeded, s.doomReason)
		}
		if s.target.sameServers(p.target.Load()) {
			t.Errorf("%s still counts as a server of the new target", s)
		}
	}
	if p.lastLoginErr != nil {
		t.Errorf("the old target's login error is kept: %v", p.lastLoginErr)
	}
	// A login started now is for the new target.
	s := p.newLoginLocked()
	if !s.target.sameServers(p.target.Load()) {
		t.Error("a new login dials the old target")
	}
	p.setServerStateLocked(s, serverClosed)
	p.mu.Unlock()

	for _, tc := range []struct {
		name string
		edit func(d *config.Database)
	}{
		{"dbname", func(d *config.Database) { d.DBName = "other" }},
		{"host", func(d *config.Database) { d.Host = "10.0.0.2" }},
		{"client_encoding", func(d *config.Database) { d.ClientEncoding = "LATIN1" }},
		{"connect_query", func(d *config.Database) { d.ConnectQuery = "SELECT 1" }},
		{"password", func(d *config.Database) { d.Password = "new" }},
	} {
		d := *p.dbEntry()
		tc.edit(&d)
		if !p.retarget(&d) {
			t.Errorf("a changed %s did not retarget the pool", tc.name)
		}
	}
}

// TestRetargetForcedUserCredentials: a forced-user pool logs its next
// servers in with the entry's new password.
func TestRetargetForcedUserCredentials(t *testing.T) {
	p := benchPool(t, 0)
	d := *p.dbEntry()
	d.User, d.Password = "bench", "old"
	p.retarget(&d)
	d2 := d
	d2.Password = "new"
	if !p.retarget(&d2) {
		t.Fatal("a changed password did not retarget the pool")
	}
	if c := p.credentials(); c.User != "bench" || c.Password != "new" {
		t.Errorf("credentials after RELOAD: %s/%s, want bench/new", c.User, c.Password)
	}
}

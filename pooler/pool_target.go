package pooler

// A pool's target: where and as whom its servers log in, and RELOAD's
// retargeting when that changes.

import (
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/wire"
)

// poolTarget is where and how a pool's servers log in, from its
// [databases] entry. Immutable: RELOAD installs a new one (retarget).
type poolTarget struct {
	db *config.Database
	// network and address of the Postgres server (cancel requests for a
	// server go there too); host is for TLS host name verification;
	// params is the startup packet of every new server connection.
	network, address, host string
	params                 []wire.Param
}

// newPoolTarget builds the target of entry db for servers logging in as
// user.
func newPoolTarget(db *config.Database, user string) *poolTarget {
	host := db.Host
	if host == "" {
		host = "/tmp"
	}
	port := db.Port
	if port == 0 {
		port = 5432
	}
	t := &poolTarget{db: db, host: host}
	t.params = []wire.Param{{Name: "user", Value: user}, {Name: "database", Value: db.ServerDBName()}}
	for _, kv := range []wire.Param{
		{Name: "client_encoding", Value: db.ClientEncoding},
		{Name: "DateStyle", Value: db.DateStyle},
		{Name: "TimeZone", Value: db.TimeZone},
		{Name: "application_name", Value: db.ApplicationName},
	} {
		if kv.Value != "" {
			t.params = append(t.params, kv)
		}
	}
	if strings.HasPrefix(host, "/") {
		t.network, t.address = "unix", filepath.Join(host, ".s.PGSQL."+strconv.Itoa(port))
	} else {
		t.network, t.address = "tcp", net.JoinHostPort(host, strconv.Itoa(port))
	}
	return t
}

// sameServers reports whether servers logged in for t are what t2 would
// log in: the same address, startup packet, forced user and password, and
// connect_query. Anything else in the entry (pool sizes, modes) applies to
// the servers a pool has.
func (t *poolTarget) sameServers(t2 *poolTarget) bool {
	return t.network == t2.network && t.address == t2.address && t.host == t2.host &&
		slices.Equal(t.params, t2.params) &&
		t.db.User == t2.db.User && t.db.Password == t2.db.Password &&
		t.db.ConnectQuery == t2.db.ConnectQuery
}

// dbEntry is the pool's current [databases] entry.
func (p *serverPool) dbEntry() *config.Database { return p.target.Load().db }

// retarget installs entry db, from a RELOAD, as PgBouncer does with a
// changed database: when the servers it logs in differ from the current
// ones (address, dbname, startup parameters, forced user or password,
// connect_query), every server of the pool is marked to close (idle ones
// at once, busy ones when released, logins to the old target when they
// end), the old target's cached login error is forgotten, and new servers
// dial the new target; clients keep their connections. It reports whether
// the servers' target changed.
func (p *serverPool) retarget(db *config.Database) bool {
	nt := newPoolTarget(db, p.key.user)
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := !p.target.Load().sameServers(nt)
	p.target.Store(nt)
	if !changed {
		return false
	}
	if db.User != "" && db.User == p.key.user {
		// A forced user's credentials are the entry's (or auth_file's).
		cred := auth.ServerCredentials{User: db.User, Password: db.Password}
		if cred.Password == "" {
			if sec, ok := p.svc.secret(db.User); ok {
				cred.Secret = &sec
			}
		}
		p.cred = cred
	}
	p.lastLoginErr = nil
	p.doomAllLocked()
	return true
}

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
	// endpoints are the entry's hosts (one, or a host list), each with
	// the network and address of its Postgres server and the host name
	// TLS verifies; a server dials the one its login was given
	// (pickEndpointLocked), and cancel requests for it go there too.
	// params is the startup packet of every new server connection.
	endpoints []endpoint
	params    []wire.Param
	// attrs is target_session_attrs ("" = any); balance is
	// load_balance_hosts ("disable" or round-robin).
	attrs, balance string
}

// endpoint is one host of a target: where its servers dial, and the host
// name their TLS verifies (verify-full checks the host actually dialled).
type endpoint struct {
	network, address, host string
}

// newEndpoint resolves one configured host and port the way PgBouncer
// does: a path is a Unix socket directory (TLS is not used there), empty
// is /tmp, anything else a TCP host name or address.
func newEndpoint(host string, port int) endpoint {
	if host == "" {
		host = "/tmp"
	}
	if port == 0 {
		port = 5432
	}
	if strings.HasPrefix(host, "/") {
		return endpoint{"unix", filepath.Join(host, ".s.PGSQL."+strconv.Itoa(port)), host}
	}
	return endpoint{"tcp", net.JoinHostPort(host, strconv.Itoa(port)), host}
}

// newPoolTarget builds the target of entry db for servers logging in as
// user.
func newPoolTarget(db *config.Database, user string) *poolTarget {
	t := &poolTarget{db: db, attrs: db.TargetSessionAttrs, balance: db.LoadBalanceHosts}
	for _, e := range db.Endpoints() {
		t.endpoints = append(t.endpoints, newEndpoint(e.Host, e.Port))
	}
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
	return t
}

// sameServers reports whether servers logged in for t are what t2 would
// log in: the same hosts, startup packet, forced user and password,
// connect_query and target_session_attrs. Anything else in the entry (pool
// sizes, modes, load_balance_hosts) applies to the servers a pool has.
func (t *poolTarget) sameServers(t2 *poolTarget) bool {
	return slices.Equal(t.endpoints, t2.endpoints) && t.attrs == t2.attrs &&
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

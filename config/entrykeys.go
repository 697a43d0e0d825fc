package config

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// The keys inside a [databases] or [users] value ("host=db1 pool_size=5")
// have key tables like [pgbouncer]'s Keys: one entry per key, holding its
// documentation (pgbouncer-compat.md is generated from it), how its text
// is parsed into the entry's field, and the field's value when the key is
// absent. An entry starts as newEntry(table): every field at its unset
// value, so "unset" is said once, by the setter helpers below, and not in
// a struct literal that a new key could be missing from.

// Unset values of per-entry fields. A -1 limit or duration means "not set
// here": Config.Resolve then takes the next level (the global setting).
const (
	unsetInt      = -1
	unsetDuration = time.Duration(-1)
)

// param is the documentation of one [databases] or [users] key.
type param struct {
	Name   string
	Kind   Kind
	Status Status
	Doc    string
	Note   string
}

// entryKey is one key of a [databases] (T = Database) or [users] (T =
// User) value: its documentation and its field.
type entryKey[T any] struct {
	param
	field field[T]
}

// field stores a key's value in an entry. unset writes the value the field
// has when the key is absent; set parses the key's text into the field.
type field[T any] struct {
	unset func(*T)
	set   func(*T, string) error
}

// entryTable is the key table of one section, with what its error and
// warning texts call an entry ("database", "user") and an unknown key.
type entryTable[T any] struct {
	what    string // "database" or "user"
	unknown string // error text before an unknown key's name
	keys    []entryKey[T]
	index   map[string]int // lower-case name -> position in keys
}

func newEntryTable[T any](what, unknown string, keys []entryKey[T]) *entryTable[T] {
	t := &entryTable[T]{what: what, unknown: unknown, keys: keys, index: make(map[string]int, len(keys))}
	for i, k := range keys {
		if _, dup := t.index[k.Name]; dup {
			panic("BUG: duplicate " + what + " key " + k.Name)
		}
		t.index[k.Name] = i
	}
	return t
}

// lookup returns the key named name (already lower case, as parseConnstr
// returns keys).
func (t *entryTable[T]) lookup(name string) (*entryKey[T], bool) {
	i, ok := t.index[name]
	if !ok {
		return nil, false
	}
	return &t.keys[i], true
}

// newEntry returns an entry with every key unset.
func (t *entryTable[T]) newEntry() *T {
	e := new(T)
	for _, k := range t.keys {
		k.field.unset(e)
	}
	return e
}

// NewUser returns a [users] entry named name with every key unset, as a
// line "name =" gives: the starting point for an entry built outside the
// file, such as a SET USER override.
func NewUser(name string) *User {
	u := userKeys.newEntry()
	u.Name = name
	return u
}

// docs returns the keys' documentation, in table order.
func (t *entryTable[T]) docs() []param {
	out := make([]param, len(t.keys))
	for i, k := range t.keys {
		out[i] = k.param
	}
	return out
}

// Setter helpers: each pairs a parser with the field's unset value.

// stringField: taken verbatim; unset is "".
func stringField[T any](f func(*T) *string) field[T] {
	return field[T]{
		unset: func(e *T) { *f(e) = "" },
		set:   func(e *T, v string) error { *f(e) = v; return nil },
	}
}

// limitField: an integer >= 0, or -1; unset is -1.
func limitField[T any](f func(*T) *int) field[T] {
	return field[T]{
		unset: func(e *T) { *f(e) = unsetInt },
		set: func(e *T, v string) (err error) {
			*f(e), err = limitInt(v)
			return err
		},
	}
}

// portListField: a TCP port, or a comma-separated list of them, one per
// host of a host list (port=5432,5433); the first is also Port, which
// SHOW DATABASES shows. Unset is Postgres's 5432.
func portListField(f func(*Database) (*int, *[]int)) field[Database] {
	return field[Database]{
		unset: func(d *Database) { p, l := f(d); *p, *l = 5432, nil },
		set: func(d *Database, v string) error {
			p, l := f(d)
			var ports []int
			for _, s := range strings.Split(v, ",") {
				i, err := parseInt(s)
				if err == nil && (i < 1 || i > 65535) {
					err = errors.New("must be between 1 and 65535")
				}
				if err != nil {
					return err
				}
				ports = append(ports, int(i))
			}
			*p, *l = ports[0], nil
			if len(ports) > 1 {
				*l = ports
			}
			return nil
		},
	}
}

// poolModeField: session, transaction or statement; unset is PoolModeUnset.
func poolModeField[T any](f func(*T) *PoolMode) field[T] {
	return field[T]{
		unset: func(e *T) { *f(e) = PoolModeUnset },
		set: func(e *T, v string) (err error) {
			*f(e), err = ParsePoolMode(v)
			return err
		},
	}
}

// durationField: seconds or a Go duration, not negative (so "-1" is
// refused: PgBouncer's parser for these keys takes no -1); unset is -1.
func durationField[T any](f func(*T) *time.Duration) field[T] {
	return field[T]{
		unset: func(e *T) { *f(e) = unsetDuration },
		set: func(e *T, v string) (err error) {
			*f(e), err = parseDuration(v)
			return err
		},
	}
}

// optDurationField: like durationField, and "-1" is accepted as unset.
func optDurationField[T any](f func(*T) *time.Duration) field[T] {
	return field[T]{
		unset: func(e *T) { *f(e) = unsetDuration },
		set: func(e *T, v string) (err error) {
			*f(e), err = optDuration(v)
			return err
		},
	}
}

// enumField: one of values (case-insensitive, stored in the canonical
// spelling); unset is "".
func enumField[T any](f func(*T) *string, values []string) field[T] {
	return field[T]{
		unset: func(e *T) { *f(e) = "" },
		set: func(e *T, v string) (err error) {
			*f(e), err = parseEnum(v, values)
			return err
		},
	}
}

// limitInt parses a per-database/user/pool integer: >= 0, or -1 = unset.
func limitInt(s string) (int, error) {
	v, err := parseInt(s)
	if err != nil {
		return 0, err
	}
	if v < -1 || v > math.MaxInt32 {
		return 0, fmt.Errorf("must be between 0 and %d (or -1 = unset)", math.MaxInt32)
	}
	return int(v), nil
}

// optDuration parses a per-database/user duration where -1 means unset.
func optDuration(s string) (time.Duration, error) {
	if s == "-1" {
		return unsetDuration, nil
	}
	return parseDuration(s)
}

var (
	loadBalanceValues  = []string{"round-robin", "disable"}
	sessionAttrsValues = []string{"any", "read-write", "read-only", "primary", "standby", "prefer-standby"}
)

// dbKeys are the keys of a [databases] connection string.
var dbKeys = newEntryTable("database", "unrecognized connection parameter", []entryKey[Database]{
	{param{"host", KindString, Supported, "host name, IP, or Unix socket directory (starts with `/`); empty = Unix socket in unix_socket_dir; a comma-separated list: new server connections go to the hosts in turn (load_balance_hosts), a host that fails is skipped until its next turn", ""},
		stringField(func(d *Database) *string { return &d.Host })},
	{param{"port", KindInt, Supported, "server port (default 5432); with a host list, one port for all or a comma-separated list with one per host", ""},
		portListField(func(d *Database) (*int, *[]int) { return &d.Port, &d.Ports })},
	{param{"dbname", KindString, Supported, "database on the server (default: the client's database name)", ""},
		stringField(func(d *Database) *string { return &d.DBName })},
	{param{"user", KindString, Supported, "forced user: all clients share one pool logged in as this user", ""},
		stringField(func(d *Database) *string { return &d.User })},
	{param{"password", KindString, Supported, "password of the forced user (else from auth_file)", ""},
		stringField(func(d *Database) *string { return &d.Password })},
	{param{"auth_user", KindString, Supported, "per-database auth_user", ""},
		stringField(func(d *Database) *string { return &d.AuthUser })},
	{param{"auth_query", KindString, Supported, "per-database auth_query", ""},
		stringField(func(d *Database) *string { return &d.AuthQuery })},
	{param{"auth_dbname", KindString, Supported, "per-database auth_dbname", ""},
		stringField(func(d *Database) *string { return &d.AuthDBName })},
	{param{"pool_size", KindInt, Supported, "pool size of this database's pools", ""},
		limitField(func(d *Database) *int { return &d.PoolSize })},
	{param{"min_pool_size", KindInt, Supported, "minimum pool size", ""},
		limitField(func(d *Database) *int { return &d.MinPoolSize })},
	{param{"reserve_pool_size", KindInt, Supported, "reserve pool size (alias `reserve_pool`)", ""},
		limitField(func(d *Database) *int { return &d.ReservePoolSize })},
	{param{"reserve_pool", KindInt, Supported, "old name of reserve_pool_size", ""},
		limitField(func(d *Database) *int { return &d.ReservePoolSize })},
	{param{"pool_mode", KindEnum, Supported, "pool mode of this database", ""},
		poolModeField(func(d *Database) *PoolMode { return &d.PoolMode })},
	{param{"max_db_connections", KindInt, Supported, "server connections of this database across users", ""},
		limitField(func(d *Database) *int { return &d.MaxDBConnections })},
	{param{"max_db_client_connections", KindInt, Supported, "client connections of this database (if > 0; else the global value)", ""},
		limitField(func(d *Database) *int { return &d.MaxDBClientConnections })},
	{param{"connect_query", KindString, Supported, "SQL run once on every new server connection", ""},
		stringField(func(d *Database) *string { return &d.ConnectQuery })},
	{param{"client_encoding", KindString, Supported, "client_encoding requested at server login", ""},
		stringField(func(d *Database) *string { return &d.ClientEncoding })},
	{param{"datestyle", KindString, Supported, "DateStyle requested at server login", ""},
		stringField(func(d *Database) *string { return &d.DateStyle })},
	{param{"timezone", KindString, Supported, "TimeZone requested at server login", ""},
		stringField(func(d *Database) *string { return &d.TimeZone })},
	{param{"application_name", KindString, Supported, "application_name in the server startup packet", ""},
		stringField(func(d *Database) *string { return &d.ApplicationName })},
	{param{"server_lifetime", KindDuration, Supported, "per-database server_lifetime", ""},
		durationField(func(d *Database) *time.Duration { return &d.ServerLifetime })},
	{param{"load_balance_hosts", KindEnum, Supported, "with a host list: `round-robin` (each new server connection takes the next host) or `disable` (the same host until a connection to it fails)", ""},
		enumField(func(d *Database) *string { return &d.LoadBalanceHosts }, loadBalanceValues)},
	{param{"query_wait_timeout", KindDuration, Supported, "per-database query_wait_timeout; -1 = unset", ""},
		optDurationField(func(d *Database) *time.Duration { return &d.QueryWaitTimeout })},
	{param{"target_session_attrs", KindEnum, Supported, "which servers a new connection accepts, checked as libpq does: any, read-write, read-only, primary, standby, prefer-standby; a server that fails it is closed and the next host tried; servers of a host that turns read-only are recycled (pgturnstile extension)", ""},
		enumField(func(d *Database) *string { return &d.TargetSessionAttrs }, sessionAttrsValues)},
})

// userKeys are the keys of a [users] value.
var userKeys = newEntryTable("user", "unrecognized user parameter", []entryKey[User]{
	{param{"pool_mode", KindEnum, Supported, "pool mode of this user's pools", ""},
		poolModeField(func(u *User) *PoolMode { return &u.PoolMode })},
	{param{"pool_size", KindInt, Supported, "pool size of this user's pools", ""},
		limitField(func(u *User) *int { return &u.PoolSize })},
	{param{"reserve_pool_size", KindInt, Supported, "reserve pool size of this user's pools", ""},
		limitField(func(u *User) *int { return &u.ReservePoolSize })},
	{param{"max_user_connections", KindInt, Supported, "server connections of this user across databases", ""},
		limitField(func(u *User) *int { return &u.MaxUserConnections })},
	{param{"max_user_client_connections", KindInt, Supported, "client connections of this user across databases (if > 0; else the global value)", ""},
		limitField(func(u *User) *int { return &u.MaxUserClientConnections })},
	{param{"query_timeout", KindDuration, Supported, "per-user query_timeout", ""},
		durationField(func(u *User) *time.Duration { return &u.QueryTimeout })},
	{param{"idle_transaction_timeout", KindDuration, Supported, "per-user idle_transaction_timeout", ""},
		durationField(func(u *User) *time.Duration { return &u.IdleTransactionTimeout })},
	{param{"transaction_timeout", KindDuration, Supported, "per-user transaction_timeout", ""},
		durationField(func(u *User) *time.Duration { return &u.TransactionTimeout })},
	{param{"client_idle_timeout", KindDuration, Supported, "per-user client_idle_timeout", ""},
		durationField(func(u *User) *time.Duration { return &u.ClientIdleTimeout })},
	{param{"query_wait_timeout", KindDuration, Supported, "per-user query_wait_timeout; -1 = unset", ""},
		optDurationField(func(u *User) *time.Duration { return &u.QueryWaitTimeout })},
})

// entry parses the "key=value ..." text of a [databases] or [users] line
// into a new entry. Errors read `<what> "<name>": ...` at file:n; a key
// that is accepted but not implemented adds a warning, once per key.
func entry[T any](p *parser, t *entryTable[T], file string, n int, name, val string) (*T, error) {
	errf := func(format string, args ...any) error {
		return &ParseError{File: file, Line: n, Msg: fmt.Sprintf("%s %q: ", t.what, name) + fmt.Sprintf(format, args...)}
	}
	pairs, err := parseConnstr(val)
	if err != nil {
		return nil, errf("%v", err)
	}
	e := t.newEntry()
	for _, kv := range pairs {
		k, known := t.lookup(kv.key)
		if !known {
			return nil, errf("%s: %s", t.unknown, kv.key)
		}
		if err := k.field.set(e, kv.val); err != nil {
			return nil, errf("invalid value %q for %s: %v", kv.val, kv.key, err)
		}
		if k.Status == NotSupported {
			p.warn(t.what+" "+kv.key, file, n, "%s parameter %q is not supported yet and is ignored", t.what, kv.key)
		}
	}
	return e, nil
}

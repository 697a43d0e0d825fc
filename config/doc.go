// Package config reads pgbouncer.ini and userlist.txt exactly as PgBouncer
// does, so an existing deployment moves to pgturnstile by swapping the
// binary.
//
// # The file
//
// pgbouncer.ini is an ini file read line by line (libusual's rules):
//
//   - blank lines and lines whose first non-blank character is ';' or '#'
//     are skipped; ';' and '#' later in a line are part of the value;
//   - "[name]" starts a section: pgbouncer, databases, users, pools
//     (Cloudflare fork), peers (peers.go); any other section is an error;
//   - "key = value": the key is letters, digits and "_.-*" or a quoted
//     name ("my db", 'a@b'), the value runs to the end of the line;
//   - "%include file" reads another file in place; the current section
//     carries across the boundary in both directions. A relative name is
//     taken relative to the working directory (PgBouncer's rule) and, when
//     no such file exists, relative to the including file. Loops and
//     nesting deeper than 10 are errors.
//
// Every problem is a *ParseError "file:line: message". Settings that are
// accepted but not implemented yet are not errors: each adds one line to
// Config.Warnings, which the caller logs.
//
// # One key table
//
// Keys holds one entry per [pgbouncer] setting: name, kind, default,
// whether RELOAD may change it, implementation status and a line of
// documentation. That single table drives parsing and validation (the
// kind), Default() and SHOW CONFIG (Value), the admin SET (Config.Set
// refuses boot-only keys), the warnings for unsupported settings, and the
// settings table in pgbouncer-compat.md, which a test keeps identical to
// the table (go test ./config -run TestCompatDoc -update rewrites it). A
// new setting is therefore one line in keys.go plus a Settings field; it
// cannot be parsed but undocumented, or documented but unknown. The keys
// inside [databases] and [users] values have their own tables (dbKeys,
// userKeys in entrykeys.go) used the same way: each entry has a setter
// that parses the key into its field, and the value the field has when the
// key is absent (-1 for limits and durations), so a new entry starts with
// every key unset from the table alone.
//
// # Effective limits
//
// A pool is a (database, user) pair. Its limits come from four places and
// Config.Resolve is the only code that combines them, highest first:
//
//	pool_size:            [pools] user.db > [users] > [databases] > default_pool_size
//	pool_mode:            [users] > [databases] > pool_mode
//	reserve_pool_size:    [users] > [databases] > reserve_pool_size
//	min_pool_size:        [databases] > min_pool_size
//	max_db_connections:   [databases] > max_db_connections
//	max_user_connections: [users] > max_user_connections
//
// Per-entry integers are -1 when not set. As in PgBouncer, a per-database
// max_db_connections or per-user max_user_connections of 0 means "use the
// global limit", not "unlimited". A [pools] size is combined with a
// [databases] pool_size as min(pool, database), Cloudflare's rule: [pools]
// can narrow a tenant but never widen it past its database's own size.
//
// # Immutability
//
// A *Config is not changed after Load/Parse returns, so any number of
// goroutines may read it. RELOAD builds a new Config and the pooler swaps
// the pointer atomically; the admin SET works on Clone() and swaps too.
package config

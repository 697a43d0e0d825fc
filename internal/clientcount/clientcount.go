// Package clientcount counts client connections by database and by login
// user, for max_db_client_connections and max_user_client_connections and
// for the current_client_connections of SHOW DATABASES and SHOW USERS.
//
// As in PgBouncer 1.25 a client counts from the check at its login (before
// its password exchange) until it closes, and one refused counts until
// then too: the caller takes the count first, then compares it with the
// cap. Each client counts in at most one database and one user, each once,
// whatever the number of checks (an auth_query login checks its user
// again once it is found).
package clientcount

import (
	"maps"
	"sync"
)

// Counts holds the counts. Its lock is a leaf, taken under no other; it
// also guards every Entry (the client's own goroutine counts it, and
// whichever goroutine closes the client uncounts it). The zero Counts is
// ready to use.
type Counts struct {
	mu     sync.Mutex
	byDB   map[string]int
	byUser map[string]int
}

// Entry is what one client counts in Counts.
type Entry struct {
	db, user     string
	inDB, inUser bool
}

// TakeDB counts e's client in database name, unless it counts in one
// already, and returns the count of the database it counts in.
func (c *Counts) TakeDB(e *Entry, name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return take(&c.byDB, &e.inDB, &e.db, name)
}

// TakeUser is TakeDB for the login user.
func (c *Counts) TakeUser(e *Entry, name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return take(&c.byUser, &e.inUser, &e.user, name)
}

func take(m *map[string]int, counted *bool, as *string, name string) int {
	if !*counted {
		if *m == nil {
			*m = map[string]int{}
		}
		(*m)[name]++
		*counted, *as = true, name
	}
	return (*m)[*as]
}

// Release uncounts what e counts. It may run more than once for a client
// (a failed login releases before it tells the client, then the close).
func (c *Counts) Release(e *Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.inDB {
		drop(c.byDB, e.db)
		e.inDB = false
	}
	if e.inUser {
		drop(c.byUser, e.user)
		e.inUser = false
	}
}

func drop(m map[string]int, name string) {
	if m[name] <= 1 {
		delete(m, name)
		return
	}
	m[name]--
}

// Snapshot copies the counts.
func (c *Counts) Snapshot() (byDB, byUser map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.byDB), maps.Clone(c.byUser)
}

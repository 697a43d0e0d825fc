// Package admission decides which waiting client gets the next server of a
// pool.
//
// The pooler calls the Queue under its pool lock: Push when a client finds no
// idle server, Pop when a server becomes free, Remove when a waiter gives up
// (query_wait_timeout, disconnect). FIFO reproduces PgBouncer exactly; the
// priority gate of PGKeeper (priorities with debt, CoDel with adaptive LIFO,
// weighted fair sharing) will implement the same interface, so the pooler
// does not change when it lands.
package admission

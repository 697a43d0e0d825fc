// Package session keeps what a sharded cluster's client carries from one
// message to the next, and decides from the client's bytes alone what the
// pooler does with them:
//
//   - the pins SET [LOCAL] pgturnstile.* made (and the startup options);
//   - the transaction the pooler holds: a BEGIN answered before any server
//     was linked, with the SAVEPOINT, RELEASE, ROLLBACK TO and SET LOCAL
//     after it, sent ahead of the transaction's first statement;
//   - the routing of the client's prepared statements, for their Binds;
//   - the decision of an extended-protocol batch (its first Bind that
//     decides a shard), and the answers to a batch of only transaction
//     control.
//
// It is pure: no sockets, no goroutines, no locks. One goroutine, the
// client's, owns a Session. The pooler (pooler/shardroute.go) links the
// servers and writes what this package returns; the rules of a decision
// are package shard's.
package session

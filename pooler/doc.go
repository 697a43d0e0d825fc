// Package pooler is the connection pooler: listeners, client sessions,
// server connections and the pools that share them.
//
// # Goroutines and ownership
//
// Every client connection has one goroutine (client.serve). It owns the
// client's reader and, while no server is linked, the client's writer. It
// reads a message header; when no server is linked it takes an admission
// ticket if admission_file is set (admission.go), checks a server out of the
// pool (waiting in its FIFO queue up to query_wait_timeout), and brings the
// server's tracked parameters in line with the client's with one SET. It
// then forwards the client's bytes to the server, flushing when the
// client's batch is consumed (no whole next message is buffered), not per
// message.
//
// When that batch ends with Sync or Query, serve relays the answer itself
// (client.relayOrPump): an autocommit transaction costs no extra goroutine
// or hand-over. A link that outlives the answer (a transaction block), COPY
// IN, a batch ending in Flush, or a link left mid-batch gets a pump
// goroutine, which runs for the rest of the link.
//
// A client idle for a second with no server linked, or silent for 100 ms
// right after its login, is parked (park.go):
// its goroutine ends, and it keeps only its session (user, database,
// parameters, prepared statements, cancel key) and its socket as a bare
// descriptor in one epoll set per service. The net.Conn, reader, writer
// and link state (client.link) are dropped; a new goroutine rebuilds them
// when the client sends or hangs up. The epoll set, like the other
// OS-specific socket code (raw reads and writes, the idle-server peek,
// SO_PEERCRED), is internal/netpoll's; on systems other than Linux it has
// none, and clients are never parked.
//
// Socket reads and writes go through wire.SocketIO: on Linux, raw system calls on
// the non-blocking descriptor, waiting in the netpoller when it is not
// ready, so the goroutine's P never enters the runtime's syscall state.
// A batch whose reply serve relays inline is written with
// Writer.FlushAwaitReply: inside the netpoller's wait for the reply, so
// that serve parks at once instead of first making a read that finds
// nothing (client.willRelayInline). The client side keeps that read: a
// client may pipeline, and bytes it sent before the wait began would not
// wake it. Instead, when clients are queued for the pool (the pooler is
// busy), serve yields (runtime.Gosched) before reading the client it has
// just answered, so that its next request has usually arrived by then.
//
// The pump (client.pumpRun, inline or as client.pump) is the only reader
// of the server while linked and the only writer to the client while
// linked. It forwards the server's
// messages as bytes and looks only inside ReadyForQuery, ParameterStatus,
// CopyIn/CopyBoth responses, and, when prepared statements are mapped,
// ParseComplete, CloseComplete, ErrorResponse and CommandComplete.
//
// The two goroutines share the link state (client.mu): serve records each
// message before it writes it to the server (linkState.fromClient); the pump
// records each ReadyForQuery. Neither holds the lock across I/O that can
// block: the pump flushes the client writer before it takes the lock to
// hand the writer back to serve (a client that stops reading must not pin
// the lock KILL_CLIENT, SHOW CLIENTS, cancels and the janitor take), and
// KILL_CLIENT closes the socket without it. serve marks itself as writing
// to the server until its batch is flushed; the pump neither releases nor
// closes a server while that is set (the next holder, or the close, would
// share its writer). A function named …Locked is called with the lock held
// and returns with it held, never releasing it in between; …Relock
// releases it while it waits and holds it again on return.
//
// While no server is linked, serve answers what needs none itself: Sync
// (ReadyForQuery 'I'), Flush, Close, a Parse of a statement some server has
// parsed, and the rest of a batch after an error the pooler raised.
//
// # Hostile input
//
// serve judges every message on its 5-byte header first (readNext): a type
// that is not a frontend message of protocol 3.0, or a length past
// max_packet_size, ends the client with a FATAL (closeBadInput) without
// its body being read or anything passed on, and a linked server is
// drained back to clean as when a client leaves, not closed. A message
// not yet wholly received is waited for (awaitMessage, bounded by
// client_message_timeout when set) before a server is taken for it or
// written to: a client that stalls mid-message holds no server. A message
// larger than the read buffer is streamed, so a server is taken once its
// first buffer-full is in; a stall after that holds the server, and a
// timeout closes it (part of a message went on). Texts sent to clients
// come from errors.go and never carry a Go error string; a failed server
// login is told in PgBouncer's words (loginReason), its detail logged.
//
// # Memory a client can make the pooler hold
//
// Message bodies are streamed through each connection's fixed buffers
// (4 KiB read, 16 KiB write) unless the pooler must look inside them, and
// the length a header claims is never trusted for an allocation:
//   - Describe, Close, Sync, Flush and the other messages Postgres caps at
//     10,000 bytes (PQ_SMALL_MESSAGE_LIMIT) are refused from a header over
//     that, as Postgres would (FATAL 08P01 invalid message length), so a
//     statement name the pooler maps is never longer; any message over
//     Postgres's 1 GiB limit likewise.
//   - A Parse the pooler maps (transaction and statement mode with
//     max_prepared_statements) is held whole: up to max_held_message_size
//     (a longer named one gets ERROR 54000 in order; a longer unnamed one
//     is streamed and not remembered), reserved first in
//     held_message_budget, shared by all clients (wire.Budget; FATAL 53200
//     for the client that would pass it). The body is allocated once at
//     its size and becomes the registered statement's text (or the
//     client's remembered unnamed Parse) without a second copy; rewrites
//     that carry a long text write it to the server by reference
//     (writeRewrite). Statement text kept is counted against
//     prepared_statement_budget (ERROR 53200 for a new named statement
//     past it; an unnamed one is then not remembered).
//   - An admin console query is taken up to pkt_buf, refused from its
//     header beyond (FATAL 54000).
//   - Rewrite buffers over 64 KiB are not kept between messages; what a
//     client holds (its reservation, its unnamed Parse, its statement
//     names) is released when it leaves. A statement's text lives while
//     any client names it or any server has it prepared.
//
// pgturnstile_held_message_bytes and pgturnstile_prepared_statement_bytes
// show both budgets' use; go_gc_heap_live_bytes the live heap.
//
// # The release rule
//
// A server goes back to its pool only when the pump has written a
// ReadyForQuery with status 'I' to the client, every Query/Sync/FunctionCall
// the client sent has been answered, the client is not mid-batch (messages
// sent after its last Sync) and no COPY is in progress; in transaction mode
// that is the end of each transaction, in statement mode the end of each
// statement (a transaction block is refused), in session mode never while
// the client is connected. afterReadyForQuery is the rule, with a table
// test.
//
// "Every request answered" follows Postgres exactly, not one
// ReadyForQuery per Query/Sync: after an error in an extended-protocol
// message Postgres skips to the next Sync (Queries and FunctionCalls
// included), and in COPY IN it ignores Sync and Flush and consumes any
// other message as the error ending the COPY. The link records the kinds
// of the messages the server has not finished and the pump counts the
// replies that complete extended messages, so each ErrorResponse and
// CopyInResponse is attributed to its message (linkState.serverError,
// copyStarted); serve refuses anything but COPY messages, Sync and Flush
// during COPY IN. Where only timing could tell (a Sync among COPY data),
// the link is marked unsure and its server is closed rather than handed
// to another client.
//
// Consequence for the extended protocol: an unnamed statement prepared in
// one Sync cycle (Parse/Describe/Sync) and executed in the next
// (Bind/Execute/Sync) stays on one server only while a transaction or a
// pipeline holds the link; outside of that the next cycle may get another
// server. PgBouncer leaves it at that, which breaks lib/pq's defaults.
// pgturnstile remembers each client's last unnamed Parse and, when a Bind or
// Describe of the unnamed statement reaches a server that does not hold that
// client's version of it, injects the Parse first and swallows its
// ParseComplete (relay_prepared.go). The unnamed portal needs nothing: it
// never outlives the Sync cycle that created it outside a transaction.
// Named statements are mapped as described in prepared.go.
//
// # A client that leaves while linked
//
// The server is not handed to anyone dirty and, when possible, not closed
// either: serve marks the link gone and expires the server's read deadline
// to wake the pump, which then drains: it discards replies still owed,
// sends Sync if the client left mid-batch, ROLLBACK if a transaction is
// open, the reset query in session mode, and releases the server once it
// is idle. Bounded exhaust (drain.go): a query still running is cancelled
// once client_drain_max_bytes of its output were discarded, or when it
// sends nothing for a moment, on a bounded cancel path, and nothing more is
// sent to the server before that cancel reached Postgres; a drain that
// takes longer than drainTimeout closes the server instead. Outcomes are
// counted (pgturnstile_server_drain_total).
//
// # Pools and caps
//
// A serverPool is keyed by (database entry, login user). pool_size (from [pools],
// [users], [databases] or default_pool_size, resolved by config.Resolve),
// reserve_pool_size after reserve_pool_timeout, and the shared caps
// max_db_connections and max_user_connections (limiter) bound the servers.
// When a shared cap blocks a pool, an idle server of a sibling pool is
// evicted. New servers are logged in by background goroutines and handed
// to the oldest waiter; a failed login is replayed to clients for
// server_login_retry. The janitor closes servers past server_idle_timeout
// or server_lifetime (spread by server_lifetime_jitter) and keeps
// min_pool_size. A server idle for a while is peeked at (non-blocking)
// before checkout, and by the janitor, so one Postgres closed is never
// handed out and is replaced.
//
// Connection safeguards (safeguards.go): logins start only with a token of
// the pool's create bucket (server_connect_rate, server_connect_burst) and
// within server_max_parallel_connects; growth that finds no token arms the
// pool's one grow timer for when the next is due. Healthy servers (idle
// timeout, lifetime, lowered limit, RECONNECT) close only with a token of
// the close bucket (server_close_rate) and otherwise stay for a later
// janitor pass; broken servers, PAUSE and KILL close at once. Service.Warm
// fills the forced-user pools to min_pool_size before clients are
// accepted, and RESUME/RECONNECT refill through the same bucket.
//
// Limits change at runtime (RELOAD, SET, SET USER, SET POOL): a pool over
// its new limit closes idle servers at once and busy ones at release (or,
// with limit_evict_grace, takes them after the grace), and never grows past
// it. PAUSE and KILL hold the pool's clients in the queue.
//
// # Cancellation
//
// Each client gets its own random BackendKeyData. A CancelRequest with that
// key is sent, on a new connection, to the Postgres backend linked to the
// client at that moment. The server is marked under the client's lock and
// the request sent with no lock held; a server released while a cancel is
// in flight waits in being_canceled (objects.go) so it cannot move to
// another client before the cancel is done.
package pooler

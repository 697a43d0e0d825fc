// Package takeover is the online restart's conversation between two
// processes (pgturnstile -R, PgBouncer's takeover), apart from the
// pooler's objects: what a SHOW FDS row carries, how the new process
// receives the rows with their descriptors and checks them, and how it
// ends the conversation.
//
// The new process (TakeOver) logs in to the old one's console over the
// Unix socket, sends SUSPEND (every client that can move comes to rest,
// parked), SHOW FDS (each listener, each parked client and each idle
// server, its descriptor passed with its row by SCM_RIGHTS) and, once it
// has built its service and bound what it binds itself, SHUTDOWN
// (Handover.Commit); any failure before that closes the connection
// instead (Handover.Abort), and the old process resumes. It trusts only a
// process of its own user or root on the socket (SO_PEERCRED), and
// refuses the takeover (ErrRefused) on any row it would not send itself:
// its descriptor (internal/fdcheck), its state (CheckRow), its links
// (a session-mode client and its server naming each other) and, against
// the new configuration, its user and database (CheckConfig).
//
// A row's State is what PgBouncer's columns do not carry: a client's
// session (cancel key, parameters, prepared statements, the credentials
// its pool's servers log in with), a server's (backend key, parameters,
// the statements it has prepared under their names on Postgres), a
// listener's address. A listener's row is built here (ListenerRow,
// MetricsRow); the pooler builds its clients' and servers' rows from its
// objects (pooler/takeover.go, the old process's side) and adopts the
// rows into its objects (pooler/takeover_adopt.go, the new process's):
// nothing here knows those objects.
//
// Descriptors pass only over a Unix socket: on Windows (takeover_other.go)
// TakeOver refuses, and nothing is ever passed.
package takeover

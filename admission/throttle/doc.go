// Package throttle is a client-side adaptive throttle for Go applications
// that reach PostgreSQL through pgturnstile with pgx v5.
//
// # Why a client-side throttle
//
// When pgturnstile's admission control sheds a transaction it answers at once
// with ERROR 53000 ("pgturnstile: transaction rejected by admission control"),
// and the connection stays usable. A shed is cheap, but not free: every shed
// request still costs a round trip, a parse on the pooler, and, when the
// application retries at once, more of the same. The Throttle makes each
// client back off by itself, in proportion to how much of its traffic the
// database is refusing, so that under overload the pooler sees about K times
// what it can accept instead of everything the application wants to send
// (Google SRE, "Handling Overload", chapter 21 of Site Reliability Engineering).
//
// # How it decides
//
// Per priority, over a sliding window (default 60 s in 10 buckets), the
// Throttle counts requests (everything the application attempted, local
// rejections included) and accepts (requests the database accepted). It
// rejects a new request locally with probability
//
//	P = max(0, (requests − K·accepts) / (requests + minRate·window))
//
// capped at MaxRejectProbability (default 0.8). With K = 2, a client whose
// database accepts A requests/s keeps sending about 2·A + minRate; when the
// database accepts everything, P is 0 and the Throttle costs one mutex and no
// randomness per request. The cap keeps at least a fifth of demand probing the
// database, so recovery is noticed quickly.
//
// Priorities: 0 is the most important (Critical, High, Medium, Low by
// default). A request at priority p also counts the requests of every more
// important priority that were not accepted, so when the database sheds high
// priority work the Throttle holds back the low priority work first, and
// trouble at low priority never throttles high priority.
//
// The cost of the window is lag: once the database heals, P decays as the
// buckets that saw the overload rotate out, which takes a little more than
// one window with K = 2 (and much longer with K close to 1). A database
// application with many instances will often prefer a 10–30 s window (see
// Window).
//
// # What counts as overload
//
// IsOverload decides: SQLSTATE 53000, 53300 or 57P03, failures to connect,
// and timeouts, including the caller's context deadline passing. Everything
// else, constraint violations, syntax errors, serialization failures, and the
// caller cancelling its context, is the database working, and counts as
// accepted. Classification uses errors.As, so wrapped errors are fine.
//
// # Using it with pgx
//
// Gate with Do, account with the Tracer, and tag the class on the context:
//
//	th := throttle.New(throttle.Window(20*time.Second, 10))
//	cfg, _ := pgxpool.ParseConfig("… options='-c pgturnstile.priority=low'")
//	cfg.ConnConfig.Tracer = throttle.Tracer{Throttle: th}
//	pool, _ := pgxpool.NewWithConfig(ctx, cfg)
//
//	ctx = throttle.WithPriority(ctx, throttle.Low)
//	err := th.Do(ctx, func(ctx context.Context) error {
//		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { … })
//	})
//	if throttle.IsOverload(err) { … answer 503, or try later … }
//
// Do asks Allow first and returns a *RejectedError when the Throttle rejects
// locally. That error unwraps to a *pgconn.PgError with SQLSTATE 53000 and the
// same message prefix and DETAIL keys as the pooler's shed, so the application
// handles both alike. Do retries overload errors (not local rejections) at
// most 3 times in all, with full-jitter exponential backoff from 10 ms up to 1 s,
// and only while retries stay within 10 % of the requests in the window; a
// client that retried everything would multiply the load of an outage.
//
// pgx tracers cannot veto a query, so the Tracer only accounts. It sees the
// final error of every Query, Exec, QueryRow, SendBatch and CopyFrom,
// including errors that surface only when rows are closed. Statements run
// outside Do count one request each; inside Do they fold into Do's attempt,
// so a transaction counts once. Code that does not use Do can call Allow
// before sending and let the Tracer (or Observe) report the outcome.
//
// # Telling the pooler the same class
//
// The context tags (WithPriority, WithCategory) are client-side only. The
// pooler learns a class from the connection or the statement: per pool, the
// startup parameter options='-c pgturnstile.priority=low -c
// pgturnstile.category=batch' (pgx sends it from the connection string; it
// does not multiply cached statements) or an application_name matched by the
// pooler's rules; per transaction, a tagged BEGIN through
// pgx.TxOptions.BeginQuery; per statement, a leading comment such as
// /* pgturnstile: priority=low */ (each distinct comment is a distinct
// statement-cache entry, so keep the set small). A simple way to keep the two
// sides consistent is one pgxpool per class.
//
// # Concurrency and testing
//
// A Throttle is safe for concurrent use and guards its state with one mutex.
// The clock, the sleep between retries and the random source are injectable
// (Now, Sleep, Rand), so tests run on a fake clock with fixed seeds.
package throttle

// Package classify turns an admission policy (config.AdmissionPolicy, the
// file named by admission_file) into the admission.Class of each
// transaction: a priority tier and a leaf of the fair-share tree.
//
// # Where a class comes from
//
// Most specific first:
//
//  1. A tag on the first statement of the transaction: a leading
//     /* pgturnstile: priority=low, category=batch */ comment or a trailing
//     sqlcommenter comment /*priority='low',source='batch'*/ (see TagOf).
//     The pooler classifies a simple Query by its text, and a transaction
//     started by Bind by the Tag it stored when it saw that statement's
//     Parse (TagOf then, ClassifyTag now), because drivers such as pgx send
//     the text of a prepared statement only once per connection.
//  2. The startup options -c pgturnstile.priority=… -c pgturnstile.LEVEL=…
//     (SplitOptions strips them before PgBouncer's own options rules).
//  3. The first [[rule]] matching the user, database and application_name.
//  4. [priorities] default, and "other" at every level of the tree.
//
// Items 1–3 are per session: Policy.Session computes them once at login and
// again whenever application_name changes, into a small Session value the
// pooler keeps per client.
//
// # What a client may ask for
//
// Keys: priority (a tier name or number), category (values from the root
// level down, "web/search", or "source=web/endpoint=search"), and one key
// per tree level. Keys this policy does not know are ignored, so the
// trailing form coexists with sqlcommenter's own keys (route, traceparent…).
// In the startup options they are not silent: Policy.OptionIssues lists an
// unknown key, a priority that names no tier and a clamped priority, and
// the pooler answers each with a NOTICE at login and counts it.
//
// Priorities are clamped: options and tags may lower a session's priority,
// and raise it no higher than the user's max_priority ([users.NAME]). When
// the user has none, the priority the rules (or the default) give the
// session is its maximum. Note that a rule on application_name is chosen by
// a value the client sets; give such users a max_priority if that matters.
//
// Categories are bounded by the declared tree: a value not declared at a
// level selects that level's implicit "other" node, so clients can neither
// create nodes nor grow the gate's state or the metrics' label sets. Within
// the declared tree a client may pick its category freely; the policy
// bounds priority, not placement.
//
// # Costs
//
// TagOf reads at most 512 bytes at each end of a statement, never parses
// SQL, and neither it, ClassifyTag nor Session allocates. A comment inside
// a string literal cannot be taken for a tag: a leading tag must start the
// statement (after whitespace) and a trailing one must end it, so a
// literal would have to be unterminated.
//
// # Reloads
//
// A Session and a Tag belong to the Policy that made them. After RELOAD
// builds a new Policy the pooler recomputes sessions (it keeps the user,
// database, application_name and option tags) and re-tags stored
// statements. Until then ClassifyTag ignores a foreign Tag, and treats a
// foreign (or zero) Session as the default session, never more important
// than the tier the Session held.
package classify

// Package auth is the pooler's side of client authentication: it decides,
// for one client that has finished its startup packet, whether the password
// it proves knowledge of matches the stored secret, speaking the PostgreSQL
// authentication sub-protocol
// (https://www.postgresql.org/docs/current/protocol-flow.html#PROTOCOL-FLOW-START-UP)
// the way PgBouncer does.
//
// # Where it sits
//
// The pooler reads the startup packet, resolves the database and the user,
// looks up the user's Secret (userlist.txt via ParseSecret; auth_query
// later) and calls
//
//	res, err := auth.Authenticate(conn, method, user, secret)
//
// where conn is a small Conn adapter over the client socket (Send one
// backend message and flush; ReadPassword returns the body of the next 'p'
// message). On success the pooler sends AuthenticationOk itself and keeps
// res for the server login. On an *Error it sends SQLState and Message as a
// FATAL ErrorResponse, logs Error() (which includes Detail), and closes. Any
// other error came from the Conn: the socket is gone.
//
// Authenticate is synchronous and owns the connection for its duration; it
// holds no state between calls apart from a per-process key for mock salts.
// Timeouts (client_login_timeout) are the caller's: set a deadline on the
// socket before calling.
//
// # Methods (auth_type)
//
//   - trust, any: no exchange. For trust the caller has already refused
//     users without an auth source ("\"trust\" authentication failed");
//     any admits every name.
//   - plain: AuthenticationCleartextPassword; the password is checked
//     against a plain secret directly, an MD5 secret by hashing, a SCRAM
//     secret by deriving its keys with its salt and iterations.
//   - md5: AuthenticationMD5Password with a random 4-byte salt, for plain
//     and MD5 secrets. With a SCRAM secret it runs SCRAM instead, as
//     PgBouncer does: the secret cannot answer an MD5 challenge.
//   - scram-sha-256: SCRAM-SHA-256 (RFC 5802, RFC 7677), see scram.go. A
//     plain secret gets an ad-hoc verifier, its keys derived once per
//     (user, password) and cached; an MD5 secret cannot do SCRAM and fails
//     at the end of a mock exchange (logged as PgBouncer does, "SCRAM
//     authentication failed: user has MD5 secret").
//   - ldap, pam: AuthenticationCleartextPassword, the password checked by an
//     outside service through a PasswordChecker (LDAPChecker in ldap.go,
//     options in ldapoptions.go, TLS from ldap.conf in ldapconf.go;
//     PAMChecker in pam.go, only with -tags pam), called by
//     AuthenticateExternal, not Authenticate: no stored secret is involved,
//     and on success the password becomes the plain secret the server
//     login uses. A refusal is 08P01 "LDAP authentication failed" / "PAM
//     authentication failed", the service's reason in Detail.
//
// Unknown users (secret == nil) go through the same exchange against a mock
// secret and fail with the same message as a wrong password: "password
// authentication failed" (28P01), or "SASL authentication failed" for
// SCRAM. Only Detail ("no such user") tells them apart, and it is never
// sent. The pooler calls Authenticate the same way for a database that
// does not exist, and says so only after a successful exchange.
//
// Where there is no stored SCRAM salt (an unknown user, an MD5 or empty
// secret, a plain password) the salt shown is userSalt: an HMAC of the
// user name under a per-process random key, as PostgreSQL's
// scram_mock_salt, with the usual 16 bytes and scram_iterations (4096
// by default, SetSCRAMIterations) iterations. It is the
// same on every attempt and the same whether or not the user exists, so
// neither the first request nor the server-first-message tells a probe
// anything; the exchange then fails like a wrong password. A broken
// exchange (malformed packet, wrong SASL mechanism, channel-binding
// mismatch) is a 08P01 protocol violation instead. Message texts live in
// errors.go and match PgBouncer and PostgreSQL.
//
// Passwords and secrets never appear in errors; Secret's String and
// GoString print only its kind. Comparisons use crypto/subtle.
//
// # Logging in to a server
//
// LoginToServer is the pooler as a client (serverlogin.go). It trusts the
// server no more than a client would: a server-first-message whose nonce
// does not extend ours, a message too large for the buffer, an
// AuthenticationOk that skips the server's SCRAM signature, and an
// iteration count above maxServerSCRAMIterations (2^20) when the pooler
// would derive the keys from a password each end the login at once. The
// bound exists because PBKDF2 is a computation no socket deadline stops.
//
// # SCRAM keys for the server login
//
// After SCRAM against a stored SCRAM secret, Result carries the client's
// ClientKey (recovered as ClientProof XOR ClientSignature) and the secret's
// ServerKey. The server-login code can answer PostgreSQL's own SCRAM
// challenge with them without knowing the password (PgBouncer's SCRAM
// pass-through); that works only when PostgreSQL holds the very same secret
// (same salt and iterations). Result is empty for every other path: keys
// derived from a plain password with a random salt are no use to the
// server, and the pooler has the password anyway.
//
// # Password normalisation
//
// Where the pooler derives SCRAM keys from a cleartext password it applies
// SASLprep as PostgreSQL does (saslprep.go), so PostgreSQL-made SCRAM
// secrets accept non-ASCII passwords typed in any normalisation form.
// MD5 never normalises, as in PostgreSQL.
//
// # Not here yet, and where it plugs in
//
//   - TLS and channel binding: once the pooler terminates TLS, offer
//     SCRAM-SHA-256-PLUS in authSCRAM with the tls-server-end-point hash of
//     the server certificate, accept "p=tls-server-end-point" in
//     parseClientFirst and compare c= against the GS2 header plus that hash.
//     Today "p=" is refused and "y,," accepted.
//   - cert: a Method that needs no exchange but checks the client
//     certificate's CN (through an ident map) against the user; it needs the
//     TLS state, so Conn will grow an optional interface for it.
//   - hba: the pooler evaluates auth_hba_file per connection (database,
//     user, address, TLS) to a Method or reject, then calls Authenticate with
//     that Method; hba's "password" is MethodPlain. ParseMethod refuses "hba"
//     and "cert".
//   - auth_query / auth_user: produce a *Secret for users missing from
//     auth_file (via ParseSecret on the returned rolpassword) before calling
//     Authenticate; when auth_query returns no row the pooler runs the mock
//     exchange, as for an unknown auth_file user (PgBouncer says "no such
//     user" at once, which tells a prober the role does not exist), and a
//     NULL rolpassword is a nil secret that no password matches.
package auth

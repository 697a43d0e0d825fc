package pooler

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"log/slog"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
	"github.com/pgturnstile/pgturnstile/wire"
)

// Authentication of a client against the user store, by auth_type or
// its auth_hba_file rule: which method applies, the secret to check
// against (auth_file or auth_query), and the pooler's side of the
// exchange (auth.Conn); the exchanges themselves are auth's.

// authenticate checks the client by auth_type (or the auth_hba_file rule
// for its connection), against the global user store: an auth_file user
// uses its secret; any other user, when an auth_user is configured, gets
// its secret from auth_query on every login (so a changed password counts
// at once), and a user auth_query does not find is refused at once with
// PgBouncer's "no such user"; otherwise a password method fails like a
// wrong password, without saying that the user is unknown, and trust
// refuses with PgBouncer's "\"trust\" authentication failed". It returns
// the secret the client was checked against and what SCRAM left for a
// pass-through server login.
//
// dbKnown=false: db is a stand-in for a database that does not exist. The
// exchange is the one a known database would get (an auth_file user with
// its own secret, anyone else a mock one), so that a client learns nothing
// before it has authenticated; auth_query then runs only in a global
// auth_dbname, as there is no database of the client's to run it in, and
// a user it does not find gets the mock exchange too.
func (c *client) authenticate(db *config.Database, dbKnown bool) (*auth.Secret, auth.Result, error) {
	st := c.svc.settings()
	var none auth.Result
	m, rule, err := c.authMethod(st)
	switch {
	case err != nil:
		return nil, none, err
	case rule.Method == auth.HBACert:
		return nil, none, c.certAuth(rule.Ident)
	case rule.Method == auth.HBAPeer:
		return c.peerAuth(st, db, dbKnown, rule.Ident)
	case m == auth.MethodAny:
		return nil, none, nil
	case m == auth.MethodLDAP || m == auth.MethodPAM:
		return c.externalAuth(st, db, m)
	}
	secret, found, err := c.userSecret(st, db, dbKnown)
	switch {
	case errors.Is(err, errAuthQueryNoRow) && m == auth.MethodTrust:
		// Trust tells a user it does not admit that anyway, so
		// PgBouncer's words cost nothing here.
		return nil, none, pgerror.New(pgerror.NoSuchUser)
	case errors.Is(err, errAuthQueryNoRow):
		// A password method runs the mock exchange and fails exactly as
		// a wrong password does, as for an unknown auth_file user and as
		// PostgreSQL does, so that nobody can probe which roles exist. A
		// deliberate difference: PgBouncer answers "no such user" at once
		// (its source marks the missing mock as a TODO);
		// pgbouncer-compat.md lists the suite tests that expect it.
		err = nil
	case err != nil:
		return nil, none, err
	}
	if !found && st.LogConnections {
		c.logger().Info("no such user: " + c.user)
	}
	if m == auth.MethodTrust {
		// Trust admits a user with an auth source only: an auth_file
		// entry or an auth_query row, a role without a password
		// included. A name only in [users] (limits, never a login) or
		// known to nobody is refused, as PgBouncer refuses its mock user.
		if !found {
			return nil, none, pgerror.New(pgerror.TrustFailed)
		}
		return secret, none, nil
	}
	res, err := auth.Authenticate(c, m, c.user, secret)
	return secret, res, err
}

// authMethod is the method auth_type names or, for auth_type=hba, that of
// the auth_hba_file rule for the client's connection (no rule, or reject,
// refuses the client). A login decided without a password exchange has
// rule.Method HBACert (auth_type=cert or an hba cert rule), which certAuth
// decides, or HBAPeer, which peerAuth decides, with the rule's ident map.
func (c *client) authMethod(st *config.Settings) (m auth.Method, rule auth.HBARule, err error) {
	switch st.AuthType {
	case "hba":
		rule, ok := c.svc.gen.Load().sec.hba.Match(auth.HBAConn{
			Local: c.local, TLS: c.tls, Addr: c.remoteIP(), Database: c.dbName, User: c.user,
			Replication: c.repl == replPhysical,
		})
		if !ok || rule.Method == auth.HBAReject {
			return m, rule, pgerror.New(pgerror.HBANoEntry, c.remoteIP().String(), c.user, c.dbName)
		}
		m, ok = rule.Method.Method()
		if !ok {
			return m, rule, pgerror.New(pgerror.HBAMethodUnsupported, rule.Method.String())
		}
		return m, rule, nil
	case "cert":
		return m, auth.HBARule{Method: auth.HBACert}, nil
	default:
		if m, err = auth.ParseMethod(st.AuthType); err != nil {
			return m, rule, pgerror.New(pgerror.AuthTypeInvalid, err.Error())
		}
		return m, rule, nil
	}
}

// userSecret is the secret to check the client against, nil when there is
// none, and whether the user has an auth source (found): an auth_file
// user's own secret, else, when an auth_user applies, what auth_query
// returns now. A row whose secret is NULL (a role without a password, or
// past its VALID UNTIL) is found with a nil secret: no password matches
// it, but trust admits it, as PgBouncer's impossible "md5" secret does.
// No row is errAuthQueryNoRow, for authenticate to decide.
func (c *client) userSecret(st *config.Settings, db *config.Database, dbKnown bool) (secret *auth.Secret, found bool, err error) {
	if u, ok := c.svc.gen.Load().users.Lookup(c.user); ok && u.Source == auth.SourceAuthFile {
		return u.Secret, true, nil
	}
	if authUserFor(db, st) == "" || !(dbKnown || st.AuthDBName != "") {
		return nil, false, nil
	}
	secret, found, err = c.svc.authQuery(c.logger(), db, c.user)
	if err != nil {
		return nil, false, c.authQueryError(err)
	}
	if !found {
		return nil, false, errAuthQueryNoRow
	}
	c.svc.gen.Load().users.NoteAuthQuery(c.user)
	// A user first known through auth_query counts from here on.
	if err := c.checkUserClients(c.svc.config(), c.user); err != nil {
		return nil, false, err
	}
	return secret, true, nil
}

// authQueryError is what a client is told when its auth_query could not
// run, in PgBouncer's words: the auth database's state as authQuery said
// it; a refused login of the auth_user's server as Postgres said it (say
// `database "x" does not exist`), as PgBouncer fails the logins waiting
// for that pool; an error of the query itself, or a server lost during
// it, as "bouncer config error", its cause logged ("error in
// auth_query: ERROR: …"); no server within server_connect_timeout as
// "authentication query failed".
func (c *client) authQueryError(err error) error {
	var told *pgerror.Error
	var refused *auth.ServerError
	switch {
	case errors.As(err, &told), errors.As(err, &refused):
		return err
	case errors.Is(err, errAuthQueryNoServer):
		c.logger().Warn("auth_query failed: " + err.Error())
		return pgerror.New(pgerror.AuthQueryFailed)
	}
	c.logger().Error("error in auth_query: " + err.Error())
	return pgerror.New(pgerror.BouncerConfigError)
}

// authUserFor is the auth_user of a database entry, else the global one.
func authUserFor(db *config.Database, st *config.Settings) string {
	if db.AuthUser != "" {
		return db.AuthUser
	}
	return st.AuthUser
}

// Send implements auth.Conn.
//
// SASL's final message is left in the writer: what follows it (the
// welcome, or the error that ends the login) flushes it in the same
// write. (A challenge is not written with FlushAwaitReply, as servers'
// requests are: a client may have sent its answer, or anything, before
// the challenge, and the wait would then sleep through the only wake-up.)
func (c *client) Send(msg pgproto3.BackendMessage) error {
	b, err := msg.Encode(c.scratch[:0])
	if err != nil {
		return err
	}
	c.scratch = b
	if err := c.w.Write(b); err != nil {
		return err
	}
	if _, final := msg.(*pgproto3.AuthenticationSASLFinal); final {
		return nil
	}
	return c.w.Flush()
}

// ReadPassword implements auth.Conn.
func (c *client) ReadPassword() ([]byte, error) {
	typ, _, err := c.r.Next()
	if err != nil {
		return nil, err
	}
	if typ != wire.MsgPassword {
		// Not skipped: the login ends here, and the "message" may be a
		// second startup packet whose bytes read as a huge length.
		return nil, pgerror.New(pgerror.ExpectedPassword, typ)
	}
	// A cleartext password can be longer than the client's read buffer
	// (PgBouncer's tests send 65,530 bytes): it is read whole, into memory
	// of its own that the login drops (counted in the held-message budget),
	// up to auth.MaxPasswordPacket; the reader has checked max_packet_size.
	body, err := c.r.ReadBodyMax(nil, auth.MaxPasswordPacket)
	if errors.Is(err, wire.ErrMessageTooLarge) {
		return nil, &auth.Error{SQLState: auth.SQLStateProtocolViolation, Message: auth.MsgMalformedPassword, Detail: "password packet too long"}
	}
	return body, err
}

// authQuery fetches a user's secret with auth_query, as auth_user, in
// auth_dbname or the client's database: on every login, so a password
// changed in Postgres counts at once. found=false means no row; a row
// with a NULL secret (the role has no password, or it expired) is found
// with a nil secret. A server that cannot be reached gives
// errAuthQueryNoServer within server_connect_timeout, never a hang. log is
// the client's (its prefix on the lines about its auth database).
func (s *Service) authQuery(log *slog.Logger, db *config.Database, user string) (*auth.Secret, bool, error) {
	st := s.settings()
	authUser := authUserFor(db, st)
	query := st.AuthQuery
	if db.AuthQuery != "" {
		query = db.AuthQuery
	}
	target := db
	dbname := st.AuthDBName
	if db.AuthDBName != "" {
		dbname = db.AuthDBName
	}
	if dbname == adminDB || (dbname == "" && db.Name == adminDB) {
		// The console has no server to ask: PgBouncer's words, the
		// cause logged, the client told "bouncer config error".
		log.Error(fmt.Sprintf("cannot use the reserved %q database as an auth_dbname", adminDB))
		return nil, false, pgerror.New(pgerror.BouncerConfigError)
	}
	if dbname != "" {
		t, ok := s.config().LookupDatabase(dbname)
		if !ok {
			// PgBouncer's words: the log says why, the client gets
			// "bouncer config error".
			log.Warn(fmt.Sprintf("authentication database %q is not configured", dbname))
			return nil, false, pgerror.New(pgerror.BouncerConfigError)
		}
		if s.isDisabled(dbname) {
			// DISABLE of the auth database stops its auth queries too.
			return nil, false, pgerror.New(pgerror.AuthDBDisabled, dbname)
		}
		target = t
	}
	// The query runs as auth_user itself, never as a forced user.
	authDB := *target
	authDB.User, authDB.Password = "", ""
	p, err := s.poolFor(&authDB, authUser)
	if err != nil {
		return nil, false, err
	}
	defer s.unpin(p)
	wait := st.ServerConnectTimeout
	if wait <= 0 {
		wait = 15 * time.Second
	}
	cancel := make(chan struct{})
	t := s.clock.AfterFunc(wait, func() { close(cancel) })
	srv, err := p.acquire(cancel, nil)
	t.Stop()
	if errors.Is(err, errWaitCanceled) {
		return nil, false, errAuthQueryNoServer
	}
	if err != nil {
		return nil, false, err
	}
	// The auth_user's connections are shared with its own clients, whose
	// SETs (a tracked search_path above all) stay on a server in
	// transaction pooling. The query runs under the role's default
	// search_path whatever a client left there: an object shadowing
	// pg_shadow in a schema a client chose must not answer it
	// (CVE-2025-12819). Nothing of the client being checked reaches this
	// connection anyway: acquire sends no SET for it.
	cols, found, err := srv.queryRow(authQueryPrelude, query, wait, user)
	if err != nil {
		if isNetError(err) {
			p.discard(srv, "auth_query failed")
		} else {
			p.release(srv)
		}
		return nil, false, err
	}
	p.release(srv)
	if !found || len(cols) < 2 {
		return nil, false, nil
	}
	if cols[1] == nil {
		return nil, true, nil
	}
	sec, err := auth.ParseSecret(*cols[1])
	if err != nil {
		return nil, false, fmt.Errorf("auth_query returned an invalid secret for %q", user)
	}
	return &sec, true, nil
}

// errAuthQueryNoServer: no server of the auth_user's pool came within
// server_connect_timeout.
var errAuthQueryNoServer = errors.New("no server for auth_query within server_connect_timeout")

// errAuthQueryNoRow: auth_query ran and returned no row for the user.
var errAuthQueryNoRow = errors.New("auth_query found no such user")

// authQueryPrelude resets search_path, for the rest of the auth query's
// implicit transaction only, to the auth_user's default (a NULL value is
// RESET); the function is schema-qualified, as the search_path it cleans
// may not lead with pg_catalog.
const authQueryPrelude = "SELECT pg_catalog.set_config('search_path', NULL, true)"

// isNetError reports a failure of the connection itself (not an SQL error).
func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

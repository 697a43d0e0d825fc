package pooler

// Logins whose password an outside service checks: auth_type = ldap, an
// auth_hba_file ldap rule, and auth_type = pam. As in PgBouncer, such a
// user needs no auth_file entry: the service decides, and the server
// login of the pool uses the password the client gave.

import (
	"context"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
)

// externalAuth runs method m (MethodLDAP or MethodPAM) for the client.
func (c *client) externalAuth(st *config.Settings, db *config.Database, m auth.Method) (*auth.Secret, auth.Result, error) {
	var none auth.Result
	if db.AuthUser != "" {
		// PgBouncer's refusal: the database's auth_user would have the
		// pool log in with a secret from auth_query, not the password
		// the service accepted.
		if m == auth.MethodLDAP {
			c.logger().Error("LDAP can't be used together with database authentication")
		} else {
			c.logger().Error("PAM can't be used together with database authentication")
		}
		return nil, none, pgerror.New(pgerror.BouncerConfigError)
	}
	var chk auth.PasswordChecker
	failMsg := auth.MsgPAMFailed
	if m == auth.MethodLDAP {
		opts, err := c.ldapOptions(st)
		if err != nil {
			// derive has checked the options; this is a SET since.
			c.logger().Warn(err.Error())
			return nil, none, &auth.Error{SQLState: auth.SQLStateProtocolViolation, Message: auth.MsgLDAPFailed, Detail: err.Error()}
		}
		chk, failMsg = &auth.LDAPChecker{Opts: opts}, auth.MsgLDAPFailed
	} else {
		chk = &auth.PAMChecker{RemoteHost: c.remoteHost()}
	}
	ctx := context.Background()
	if st.ClientLoginTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, st.ClientLoginTimeout)
		defer cancel()
	}
	secret, err := auth.AuthenticateExternal(ctx, c, c.user, chk, failMsg)
	if ae, ok := err.(*auth.Error); ok && ae.Message == failMsg {
		// PgBouncer logs the service's reason as a warning.
		c.logger().Warn(ae.Detail)
	}
	if err != nil {
		return nil, none, err
	}
	// A user the service let in is a user of the pooler from here on, as
	// in PgBouncer: listed by SHOW USERS and counted against
	// max_user_client_connections. Only after the check, so that probing
	// names do not fill the store.
	c.svc.gen.Load().users.NoteExternal(c.user)
	if err := c.checkUserClients(c.svc.config(), c.user); err != nil {
		return nil, none, err
	}
	return secret, none, nil
}

// ldapOptions are the LDAP options for the client: those of its
// auth_hba_file rule under auth_type = hba, else auth_ldap_options.
func (c *client) ldapOptions(st *config.Settings) (*auth.LDAPOptions, error) {
	if st.AuthType == "hba" {
		rule, ok := c.svc.gen.Load().sec.hba.Match(auth.HBAConn{
			Local: c.local, TLS: c.tls, Addr: c.remoteIP(), Database: c.dbName, User: c.user,
			Replication: c.repl == replPhysical,
		})
		if ok && rule.LDAP != nil {
			return rule.LDAP, nil
		}
	}
	return auth.ParseLDAPOptions(st.AuthLDAPOptions)
}

// remoteHost is the client's address as PAM_RHOST takes it; "unix" for a
// Unix-socket client, as PgBouncer's pga_ntop writes it.
func (c *client) remoteHost() string {
	if c.local {
		return "unix"
	}
	return c.remoteIP().String()
}

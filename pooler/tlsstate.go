package pooler

import (
	"crypto/tls"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
)

// TLS settings are kept as given and applied only as a consistent set, as
// PgBouncer's sbuf_tls_setup does: rotating a certificate from the console
// takes one SET per file, and between them the key does not match the
// certificate. Until the set loads, the TLS in force stays the last one
// that did, and each attempt says so (a NOTICE to the console's SET, an
// error from RELOAD); SHOW CONFIG shows the values given.

// appliedTLS is the TLS in force: built together from one set of
// client_tls_* and server_tls_* values that loaded.
type appliedTLS struct {
	clientTLS  *tls.Config // nil: SSLRequest is answered 'N'
	clientMode string      // client_tls_sslmode of clientTLS
	serverTLS  auth.TLSSettings
	// serverBase is built from serverTLS for no host (nil: disable);
	// auth.ServerTLSForHost completes it for each server's host.
	serverBase *tls.Config
}

// tlsWanted is a set of TLS settings as the configuration gives them.
type tlsWanted struct{ client, server auth.TLSSettings }

func tlsWantedOf(cfg *config.Config) tlsWanted {
	st := &cfg.Settings
	// *_tls13_ciphers have no Settings field: they are checked only.
	client13, _ := cfg.Value("client_tls13_ciphers")
	server13, _ := cfg.Value("server_tls13_ciphers")
	return tlsWanted{
		client: auth.TLSSettings{
			Mode: st.ClientTLSSSLMode, KeyFile: st.ClientTLSKeyFile, CertFile: st.ClientTLSCertFile,
			CAFile: st.ClientTLSCAFile, Protocols: st.ClientTLSProtocols, Ciphers: st.ClientTLSCiphers,
			Ciphers13: client13, ECDHCurve: st.ClientTLSECDHCurve,
		},
		server: auth.TLSSettings{
			Mode: st.ServerTLSSSLMode, KeyFile: st.ServerTLSKeyFile, CertFile: st.ServerTLSCertFile,
			CAFile: st.ServerTLSCAFile, Protocols: st.ServerTLSProtocols, Ciphers: st.ServerTLSCiphers,
			Ciphers13: server13,
		},
	}
}

// buildTLS loads the files of w and builds both sides' configurations;
// nothing is applied. warnings are about settings Go cannot honour.
func buildTLS(w tlsWanted) (t appliedTLS, warnings []string, err error) {
	cfg, warn, err := auth.ClientTLSConfig(w.client)
	if err != nil {
		return t, warnings, err
	}
	if warn != "" {
		warnings = append(warnings, warn)
	}
	// The server side is built once here, so a bad file is found now
	// rather than at the next server login.
	base, warn, err := auth.ServerTLSConfig(w.server, "")
	if err != nil {
		return t, warnings, err
	}
	if warn != "" {
		warnings = append(warnings, warn)
	}
	return appliedTLS{clientTLS: cfg, clientMode: w.client.Mode, serverTLS: w.server, serverBase: base}, warnings, nil
}

// deriveTLS decides the TLS that a configuration cfg puts in
// force, given the running security state old (nil at start). The files
// are read again at start, RELOAD and SIGHUP, and when a TLS setting
// changed (PgBouncer applies TLS on those and on a SET of a TLS key, not
// on other SETs). A set that does not load is an error at start; later it
// leaves old's TLS in force and is returned as notApplied.
func deriveTLS(old *securityState, cfg *config.Config, fromFile bool) (t appliedTLS, want tlsWanted, warnings []string, notApplied, err error) {
	want = tlsWantedOf(cfg)
	if old != nil && !fromFile && old.tlsWant == want {
		return old.appliedTLS, want, nil, nil, nil
	}
	t, warnings, err = buildTLS(want)
	switch {
	case err == nil:
		return t, want, warnings, nil, nil
	case old == nil:
		return t, want, warnings, nil, err
	}
	return old.appliedTLS, want, warnings, &tlsNotAppliedError{err}, nil
}

// tlsNotAppliedError is Apply's answer when everything was applied but the
// TLS settings, which did not load; the TLS in force stays as it was.
type tlsNotAppliedError struct{ err error }

func (e *tlsNotAppliedError) Error() string {
	return msgTLSSetNotApplied + ": " + e.err.Error()
}
func (e *tlsNotAppliedError) Unwrap() error { return e.err }

// PgBouncer's words for a TLS set that did not load: the console's SET
// NOTICE (admin.c) and RELOAD's and SIGHUP's log line (admin.c, main.c).
const (
	msgTLSSetNotApplied    = "TLS settings could not be applied, still using old configuration"
	msgTLSReloadNotApplied = "TLS configuration could not be reloaded, keeping old configuration"
)

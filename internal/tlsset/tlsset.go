// Package tlsset is the TLS a pooler puts in force, from its client_tls_*
// and server_tls_* settings, applied only as a consistent set.
//
// PgBouncer's sbuf_tls_setup does the same: rotating a certificate from
// the console takes one SET per file, and between them the key does not
// match the certificate. Until the set loads, the TLS in force stays the
// last one that did, and each attempt says so (a NOTICE to the console's
// SET, an error from RELOAD); SHOW CONFIG shows the values given.
package tlsset

import (
	"crypto/tls"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
)

// Applied is the TLS in force: built together from one set of
// client_tls_* and server_tls_* values that loaded.
type Applied struct {
	ClientTLS  *tls.Config // nil: SSLRequest is answered 'N'
	ClientMode string      // client_tls_sslmode of ClientTLS
	ServerTLS  auth.TLSSettings
	// ServerBase is built from ServerTLS for no host (nil: disable);
	// auth.ServerTLSForHost completes it for each server's host.
	ServerBase *tls.Config
}

// Wanted is a set of TLS settings as the configuration gives them.
type Wanted struct{ Client, Server auth.TLSSettings }

// WantedOf reads the TLS settings of cfg.
func WantedOf(cfg *config.Config) Wanted {
	st := &cfg.Settings
	// *_tls13_ciphers have no Settings field: they are checked only.
	client13, _ := cfg.Value("client_tls13_ciphers")
	server13, _ := cfg.Value("server_tls13_ciphers")
	return Wanted{
		Client: auth.TLSSettings{
			Mode: st.ClientTLSSSLMode, KeyFile: st.ClientTLSKeyFile, CertFile: st.ClientTLSCertFile,
			CAFile: st.ClientTLSCAFile, Protocols: st.ClientTLSProtocols, Ciphers: st.ClientTLSCiphers,
			Ciphers13: client13, ECDHCurve: st.ClientTLSECDHCurve,
		},
		Server: auth.TLSSettings{
			Mode: st.ServerTLSSSLMode, KeyFile: st.ServerTLSKeyFile, CertFile: st.ServerTLSCertFile,
			CAFile: st.ServerTLSCAFile, Protocols: st.ServerTLSProtocols, Ciphers: st.ServerTLSCiphers,
			Ciphers13: server13,
		},
	}
}

// Build loads the files of w and builds both sides' configurations;
// nothing is applied. warnings are about settings Go cannot honour.
func Build(w Wanted) (t Applied, warnings []string, err error) {
	cfg, warn, err := auth.ClientTLSConfig(w.Client)
	if err != nil {
		return t, warnings, err
	}
	if warn != "" {
		warnings = append(warnings, warn)
	}
	// The server side is built once here, so a bad file is found now
	// rather than at the next server login.
	base, warn, err := auth.ServerTLSConfig(w.Server, "")
	if err != nil {
		return t, warnings, err
	}
	if warn != "" {
		warnings = append(warnings, warn)
	}
	return Applied{ClientTLS: cfg, ClientMode: w.Client.Mode, ServerTLS: w.Server, ServerBase: base}, warnings, nil
}

// State is the TLS in force and the settings last given, applied or not.
type State struct {
	Applied
	Want Wanted
}

// Derive decides the TLS that a configuration cfg puts in force, given the
// running state old (nil at start). The files are read again at start,
// RELOAD and SIGHUP (fromFile), and when a TLS setting changed (PgBouncer
// applies TLS on those and on a SET of a TLS key, not on other SETs). A
// set that does not load is an error at start; later it leaves old's TLS
// in force and is returned as notApplied, a *NotAppliedError.
func Derive(old *State, cfg *config.Config, fromFile bool) (next State, warnings []string, notApplied, err error) {
	want := WantedOf(cfg)
	if old != nil && !fromFile && old.Want == want {
		return State{old.Applied, want}, nil, nil, nil
	}
	t, warnings, err := Build(want)
	switch {
	case err == nil:
		return State{t, want}, warnings, nil, nil
	case old == nil:
		return State{t, want}, warnings, nil, err
	}
	return State{old.Applied, want}, warnings, &NotAppliedError{err}, nil
}

// ServerChanged says whether servers connected with server_tls_* a must
// reconnect under b: any setting changed, unless TLS is off under both
// (PgBouncer's rule: then no connection used any of them).
func ServerChanged(a, b auth.TLSSettings) bool {
	off := func(t auth.TLSSettings) bool { return t.Mode == "" || t.Mode == auth.TLSDisable }
	return a != b && !(off(a) && off(b))
}

// NotAppliedError is the answer to a configuration applied whole but for
// its TLS settings, which did not load; the TLS in force stays as it was.
type NotAppliedError struct{ Err error }

func (e *NotAppliedError) Error() string {
	return SetNotApplied + ": " + e.Err.Error()
}
func (e *NotAppliedError) Unwrap() error { return e.Err }

// PgBouncer's words for a TLS set that did not load: the console's SET
// NOTICE (admin.c) and RELOAD's and SIGHUP's log line (admin.c, main.c).
const (
	SetNotApplied    = "TLS settings could not be applied, still using old configuration"
	ReloadNotApplied = "TLS configuration could not be reloaded, keeping old configuration"
)

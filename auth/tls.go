package auth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
)

// TLSSettings are one side's PgBouncer TLS settings (client_tls_* or
// server_tls_*).
type TLSSettings struct {
	Mode                      string // disable allow prefer require verify-ca verify-full
	KeyFile, CertFile, CAFile string
	Protocols, Ciphers        string
	// Ciphers13 is *_tls13_ciphers: checked (as OpenSSL would refuse
	// it), not applied: crypto/tls chooses TLS 1.3 suites itself.
	Ciphers13 string
	// ECDHCurve is client_tls_ecdhcurve (ecdhcurve.go); client side only.
	ECDHCurve string
}

// TLS modes, PgBouncer's (and libpq's) names.
const (
	TLSDisable    = "disable"
	TLSAllow      = "allow"
	TLSPrefer     = "prefer"
	TLSRequire    = "require"
	TLSVerifyCA   = "verify-ca"
	TLSVerifyFull = "verify-full"
)

// ClientTLSConfig builds the configuration for TLS towards clients, or nil
// when client_tls_sslmode is disable. A key and certificate are required
// for any other mode. verify-ca and verify-full demand a client certificate
// signed by client_tls_ca_file; with a CA file and a weaker mode, a
// certificate is verified if the client offers one (for auth_type=cert).
// warn is a note for the log about settings Go cannot honour.
func ClientTLSConfig(s TLSSettings) (cfg *tls.Config, warn string, err error) {
	if s.Mode == "" || s.Mode == TLSDisable {
		return nil, "", nil
	}
	if s.KeyFile == "" || s.CertFile == "" {
		return nil, "", fmt.Errorf("client_tls_sslmode=%s needs client_tls_key_file and client_tls_cert_file", s.Mode)
	}
	cert, err := loadKeyPair(s.CertFile, s.KeyFile)
	if err != nil {
		return nil, "", fmt.Errorf("client TLS key pair: %v", err)
	}
	// ALPN "postgresql" (PostgreSQL 17, PgBouncer 1.25): a client that
	// offers other protocols only is refused in the handshake; one that
	// offers none is accepted (the pooler requires it for direct TLS).
	cfg = &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"postgresql"}}
	if cfg.MinVersion, cfg.MaxVersion, err = tlsVersions(s.Protocols); err != nil {
		return nil, "", fmt.Errorf("client_tls_protocols: %v", err)
	}
	warn = cipherWarning("client_tls_ciphers", s.Ciphers)
	if err := checkTLS13Ciphers(s.Ciphers13); err != nil {
		return nil, "", err
	}
	if cfg.CurvePreferences, err = ecdhCurves(s.ECDHCurve); err != nil {
		return nil, "", err
	}
	if s.CAFile != "" {
		pool, err := loadCAs(s.CAFile)
		if err != nil {
			return nil, "", fmt.Errorf("client_tls_ca_file: %v", err)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	if s.Mode == TLSVerifyCA || s.Mode == TLSVerifyFull {
		if s.CAFile == "" {
			return nil, "", fmt.Errorf("client_tls_sslmode=%s needs client_tls_ca_file", s.Mode)
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, warn, nil
}

// ClientTLSRequired reports whether clients must use TLS.
func ClientTLSRequired(mode string) bool {
	return mode == TLSRequire || mode == TLSVerifyCA || mode == TLSVerifyFull
}

// ServerTLSConfig builds the configuration for TLS towards a Postgres at
// host, or nil when server_tls_sslmode is disable. allow, prefer and
// require encrypt without verifying the server (allow is prefer, as in
// PgBouncer: TLS is asked for first, plaintext accepted when the server
// refuses it); verify-ca checks the chain against server_tls_ca_file, or
// against the system's trust store when no CA file is set (as PgBouncer's
// libtls does); verify-full also checks the host name. host may be empty
// for a configuration that ServerTLSForHost completes per server.
func ServerTLSConfig(s TLSSettings, host string) (cfg *tls.Config, warn string, err error) {
	if s.Mode == "" || s.Mode == TLSDisable {
		return nil, "", nil
	}
	cfg = &tls.Config{}
	if cfg.MinVersion, cfg.MaxVersion, err = tlsVersions(s.Protocols); err != nil {
		return nil, "", fmt.Errorf("server_tls_protocols: %v", err)
	}
	warn = cipherWarning("server_tls_ciphers", s.Ciphers)
	if err := checkTLS13Ciphers(s.Ciphers13); err != nil {
		return nil, "", err
	}
	if s.CertFile != "" || s.KeyFile != "" {
		cert, err := loadKeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return nil, "", fmt.Errorf("server TLS key pair: %v", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	switch s.Mode {
	case TLSAllow, TLSPrefer, TLSRequire:
		// Encryption without authentication of the server, as libpq.
		cfg.InsecureSkipVerify = true
	case TLSVerifyCA, TLSVerifyFull:
		// A nil pool is the system's trust store.
		var pool *x509.CertPool
		if s.CAFile != "" {
			if pool, err = loadCAs(s.CAFile); err != nil {
				return nil, "", fmt.Errorf("server_tls_ca_file: %v", err)
			}
		}
		cfg.RootCAs = pool
		// Verified by verifyServer rather than by crypto/tls, which
		// refuses a certificate that names its host only in the Common
		// Name; libtls (PgBouncer) and libpq accept one without SANs.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = verifyServer(pool, s.Mode, host)
		if s.Mode == TLSVerifyFull {
			cfg.ServerName = host // sent as SNI
		}
	default:
		return nil, "", fmt.Errorf("unknown server_tls_sslmode %q", s.Mode)
	}
	return cfg, warn, nil
}

// ServerTLSForHost is base (from ServerTLSConfig with no host) for a
// connection to host: under verify-full the certificate must name host.
// base is shared by every login and is not changed.
func ServerTLSForHost(base *tls.Config, mode, host string) *tls.Config {
	if mode != TLSVerifyFull {
		return base
	}
	cfg := base.Clone()
	cfg.ServerName = host
	cfg.VerifyConnection = verifyServer(base.RootCAs, mode, host)
	return cfg
}

// verifyServer checks a server's certificate chain against roots (nil:
// the system's) and, under verify-full, that it is for host: by its SANs,
// or by its Common Name when it has none, as libtls and libpq do.
func verifyServer(roots *x509.CertPool, mode, host string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		certs := cs.PeerCertificates
		if len(certs) == 0 {
			return errors.New("server sent no certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		leaf := certs[0]
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter}); err != nil {
			return err
		}
		if mode != TLSVerifyFull {
			return nil
		}
		if len(leaf.DNSNames) > 0 || len(leaf.IPAddresses) > 0 {
			return leaf.VerifyHostname(host)
		}
		if !commonNameMatches(leaf.Subject.CommonName, host) {
			return x509.HostnameError{Certificate: leaf, Host: host}
		}
		return nil
	}
}

// commonNameMatches matches a certificate's Common Name against host,
// ignoring case; "*." matches one leftmost label of a host name.
func commonNameMatches(cn, host string) bool {
	cn, host = strings.ToLower(strings.TrimSuffix(cn, ".")), strings.ToLower(strings.TrimSuffix(host, "."))
	if cn == "" || host == "" {
		return false
	}
	if rest, ok := strings.CutPrefix(cn, "*."); ok {
		_, after, found := strings.Cut(host, ".")
		return found && net.ParseIP(host) == nil && after == rest
	}
	return cn == host
}

// ServerTLSRequired reports whether a server that refuses TLS is an error.
func ServerTLSRequired(mode string) bool {
	return mode == TLSRequire || mode == TLSVerifyCA || mode == TLSVerifyFull
}

// loadKeyPair is tls.LoadX509KeyPair with the file at fault named: Go's
// parse errors ("failed to find any PEM data in certificate input") name
// neither file, and a key pair is two.
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, err // *PathError: names the file
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	switch {
	case err == nil:
		return cert, nil
	case !hasCertificate(certPEM):
		return cert, fmt.Errorf("%s: %v", certFile, err)
	case strings.Contains(err.Error(), "does not match"):
		return cert, fmt.Errorf("%s and %s: %v", keyFile, certFile, err)
	}
	return cert, fmt.Errorf("%s: %v", keyFile, err)
}

// hasCertificate says whether data holds a PEM CERTIFICATE block that
// parses, as tls.X509KeyPair needs first.
func hasCertificate(data []byte) bool {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return false
		}
		if b.Type == "CERTIFICATE" {
			_, err := x509.ParseCertificate(b.Bytes)
			return err == nil
		}
	}
}

func loadCAs(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificates", path)
	}
	return pool, nil
}

// tlsVersions maps PgBouncer's protocol list ("secure", "all", "legacy",
// "default", or tlsv1.0…tlsv1.3 separated by commas, colons or spaces) to
// a version range.
func tlsVersions(spec string) (minV, maxV uint16, err error) {
	versions := map[string]uint16{"tlsv1.0": tls.VersionTLS10, "tlsv1.1": tls.VersionTLS11, "tlsv1.2": tls.VersionTLS12, "tlsv1.3": tls.VersionTLS13}
	spec = strings.ToLower(strings.TrimSpace(spec))
	switch spec {
	case "", "secure", "default":
		return tls.VersionTLS12, tls.VersionTLS13, nil
	case "all", "legacy":
		return tls.VersionTLS10, tls.VersionTLS13, nil
	}
	for _, f := range strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == ':' || r == ' ' }) {
		v, ok := versions[strings.TrimPrefix(f, "+")]
		if !ok {
			return 0, 0, fmt.Errorf("unknown protocol %q", f)
		}
		if minV == 0 || v < minV {
			minV = v
		}
		if v > maxV {
			maxV = v
		}
	}
	if minV == 0 {
		return 0, 0, errors.New("no protocol enabled")
	}
	return minV, maxV, nil
}

// tls13Suites are the TLS 1.3 cipher suites by their OpenSSL (and IANA)
// names.
var tls13Suites = map[string]bool{
	"TLS_AES_128_GCM_SHA256": true, "TLS_AES_256_GCM_SHA384": true, "TLS_CHACHA20_POLY1305_SHA256": true,
	"TLS_AES_128_CCM_SHA256": true, "TLS_AES_128_CCM_8_SHA256": true,
}

// checkTLS13Ciphers refuses a *_tls13_ciphers list that names no TLS 1.3
// suite, with libtls's words, which PgBouncer logs after "TLS setup
// failed: ". Unknown names beside known ones are skipped, as OpenSSL does.
func checkTLS13Ciphers(spec string) error {
	if strings.TrimSpace(spec) == "" {
		return nil
	}
	for _, name := range strings.Split(spec, ":") {
		if tls13Suites[strings.TrimSpace(name)] {
			return nil
		}
	}
	return errors.New("failed to set the TLSv1.3 cipher suites")
}

// cipherWarning explains that OpenSSL cipher strings do not apply: Go's
// crypto/tls offers only suites it considers secure, in its own order.
func cipherWarning(key, spec string) string {
	switch strings.ToLower(strings.TrimSpace(spec)) {
	case "", "default", "secure", "fast", "normal", "all", "legacy":
		return ""
	}
	return fmt.Sprintf("%s = %q: OpenSSL cipher strings are not supported; Go's secure default suites are used", key, spec)
}

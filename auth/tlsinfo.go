package auth

import (
	"crypto/tls"
	"strings"
)

// TLSInfo describes a TLS connection as PgBouncer's login attempt line and
// SHOW CLIENTS do (libtls's connection info): protocol, cipher suite and
// key exchange group, e.g. "TLSv1.3/TLS_AES_128_GCM_SHA256/ECDH=X25519".
// TLS 1.3 suites have the same names in OpenSSL and Go; a TLS 1.2 suite
// is named as Go names it.
func TLSInfo(cs tls.ConnectionState) string {
	info := strings.Replace(tls.VersionName(cs.Version), "TLS 1.", "TLSv1.", 1) + "/" + tls.CipherSuiteName(cs.CipherSuite)
	if g := groupName(cs.CurveID); g != "" {
		info += "/ECDH=" + g
	}
	return info
}

// groupName is OpenSSL's short name of a key exchange group, which
// PgBouncer logs; "" when none was used (an RSA key exchange).
func groupName(id tls.CurveID) string {
	switch id {
	case 0:
		return ""
	case tls.CurveP256:
		return "prime256v1"
	case tls.CurveP384:
		return "secp384r1"
	case tls.CurveP521:
		return "secp521r1"
	}
	return id.String() // X25519, X25519MLKEM768, …: OpenSSL's names too
}

package auth

import (
	"crypto/tls"
	"testing"
)

// The login attempt line and SHOW CLIENTS describe a client's TLS as
// PgBouncer does ("tls=TLSv1.3/TLS_AES_256_GCM_SHA384/ECDH=X25519"), which
// the suite and operators' log searches match.
func TestTLSInfoIsPgBouncers(t *testing.T) {
	for _, tc := range []struct {
		cs   tls.ConnectionState
		want string
	}{
		{tls.ConnectionState{Version: tls.VersionTLS13, CipherSuite: tls.TLS_CHACHA20_POLY1305_SHA256, CurveID: tls.X25519}, "TLSv1.3/TLS_CHACHA20_POLY1305_SHA256/ECDH=X25519"},
		{tls.ConnectionState{Version: tls.VersionTLS13, CipherSuite: tls.TLS_AES_256_GCM_SHA384, CurveID: tls.X25519MLKEM768}, "TLSv1.3/TLS_AES_256_GCM_SHA384/ECDH=X25519MLKEM768"},
		{tls.ConnectionState{Version: tls.VersionTLS12, CipherSuite: tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, CurveID: tls.CurveP256}, "TLSv1.2/TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256/ECDH=prime256v1"},
		{tls.ConnectionState{Version: tls.VersionTLS12, CipherSuite: tls.TLS_RSA_WITH_AES_128_GCM_SHA256}, "TLSv1.2/TLS_RSA_WITH_AES_128_GCM_SHA256"},
	} {
		if got := TLSInfo(tc.cs); got != tc.want {
			t.Errorf("tlsInfo = %q; want %q", got, tc.want)
		}
	}
}

package auth

import (
	"crypto/tls"
	"fmt"
	"strings"
)

// ecdhCurves maps client_tls_ecdhcurve to crypto/tls's curve preferences,
// as libtls's tls_config_set_ecdhecurve reads it: "auto" (any case) is
// the library's own choice, "none" sets nothing (OpenSSL 1.1+ and Go then
// use their defaults: a TLS 1.3 handshake always needs a key exchange),
// and a curve name is the only curve offered. OpenSSL's names are
// accepted (prime256v1, secp384r1, secp521r1, X25519, as OBJ_txt2nid
// knows them) and Go's (P-256, P-384, P-521); any other is refused with
// PgBouncer's message. nil is Go's defaults.
func ecdhCurves(v string) ([]tls.CurveID, error) {
	if v == "" || strings.EqualFold(v, "auto") || strings.EqualFold(v, "none") {
		return nil, nil
	}
	var id tls.CurveID
	switch v {
	case "prime256v1", "P-256":
		id = tls.CurveP256
	case "secp384r1", "P-384":
		id = tls.CurveP384
	case "secp521r1", "P-521":
		id = tls.CurveP521
	case "X25519":
		id = tls.X25519
	default:
		return nil, fmt.Errorf("invalid client_ecdhecurve: %s", v)
	}
	return []tls.CurveID{id}, nil
}

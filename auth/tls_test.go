package auth

import "testing"

// server_tls_sslmode: disable asks for no TLS; allow is prefer, as in
// PgBouncer (TLS is asked for, without verifying the server, and a refusal
// is accepted); require also encrypts without verifying but needs TLS.
func TestServerTLSConfigModes(t *testing.T) {
	for _, tc := range []struct {
		mode           string
		wantTLS        bool
		wantRequired   bool
		wantSkipVerify bool
	}{
		{TLSDisable, false, false, false},
		{"", false, false, false},
		{TLSAllow, true, false, true},
		{TLSPrefer, true, false, true},
		{TLSRequire, true, true, true},
	} {
		cfg, _, err := ServerTLSConfig(TLSSettings{Mode: tc.mode}, "db.example")
		if err != nil {
			t.Errorf("%q: %v", tc.mode, err)
			continue
		}
		if (cfg != nil) != tc.wantTLS {
			t.Errorf("%q: TLS config %v; want TLS asked for: %v", tc.mode, cfg != nil, tc.wantTLS)
			continue
		}
		if cfg != nil && cfg.InsecureSkipVerify != tc.wantSkipVerify {
			t.Errorf("%q: InsecureSkipVerify %v; want %v", tc.mode, cfg.InsecureSkipVerify, tc.wantSkipVerify)
		}
		if got := ServerTLSRequired(tc.mode); got != tc.wantRequired {
			t.Errorf("%q: ServerTLSRequired %v; want %v", tc.mode, got, tc.wantRequired)
		}
	}
}

package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgturnstile/pgturnstile/internal/testcert"
)

// A TLS file that does not parse is named in the error, whichever it is:
// Go's own texts ("failed to find any PEM data in certificate input")
// name no file.
func TestTLSKeyPairErrorNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	ca, err := testcert.NewCA(dir, "files CA")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := ca.Issue(dir, "server", testcert.Localhost, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := ca.Issue(dir, "other", testcert.Localhost, nil)
	if err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a PEM file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, cert, key string
		want            []string
	}{
		{"garbage certificate", garbage, keyFile, []string{garbage + ": "}},
		{"garbage key", certFile, garbage, []string{garbage + ": "}},
		{"key of another certificate", certFile, otherKey, []string{otherKey, certFile}},
	} {
		_, _, cerr := ClientTLSConfig(TLSSettings{Mode: TLSRequire, CertFile: tc.cert, KeyFile: tc.key})
		_, _, serr := ServerTLSConfig(TLSSettings{Mode: TLSRequire, CertFile: tc.cert, KeyFile: tc.key}, "")
		for side, err := range map[string]error{"client": cerr, "server": serr} {
			if err == nil {
				t.Errorf("%s, %s side: no error", tc.name, side)
				continue
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s, %s side: %q does not name %s", tc.name, side, err, w)
				}
			}
		}
	}
	if _, _, err := ClientTLSConfig(TLSSettings{Mode: TLSRequire, CertFile: certFile, KeyFile: keyFile}); err != nil {
		t.Errorf("the good pair: %v", err)
	}
}

package pooler

import "testing"

// Only the frontend messages of protocol 3.0 pass after login.
func TestFrontendTypes(t *testing.T) {
	var ok []byte
	for b := 0; b < 256; b++ {
		if isFrontendType(byte(b)) {
			ok = append(ok, byte(b))
		}
	}
	if got, want := string(ok), "BCDEFHPQSXcdf"; got != want {
		t.Errorf("accepted %q, want %q", got, want)
	}
}

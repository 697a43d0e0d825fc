package auth

import (
	"bytes"
	"testing"
)

// TestSCRAMIterationsSetting: scram_iterations is the count of the
// verifiers built for plain passwords and for the mock exchange, and keys
// cached under one count are not reused under another; stored secrets
// keep theirs.
func TestSCRAMIterationsSetting(t *testing.T) {
	defer SetSCRAMIterations(DefaultSCRAMIterations)
	const user = "iter-user"
	v4096 := adHocVerifier(user, "pw")
	if v4096.iterations != DefaultSCRAMIterations {
		t.Fatalf("default ad-hoc count %d", v4096.iterations)
	}
	SetSCRAMIterations(1000)
	v := adHocVerifier(user, "pw")
	want := deriveSCRAMKeys("pw", userSalt(user), 1000)
	if v.iterations != 1000 || !bytes.Equal(v.storedKey, want.stored) || !bytes.Equal(v.serverKey, want.server) {
		t.Fatalf("ad-hoc verifier under scram_iterations=1000: count %d, keys match=%v", v.iterations, bytes.Equal(v.storedKey, want.stored))
	}
	if m := mockVerifier(user, "x"); m.iterations != 1000 {
		t.Errorf("mock verifier count %d, want 1000", m.iterations)
	}
	stored := &Secret{Kind: SecretSCRAM, Iterations: 4096, Salt: []byte("s"), StoredKey: []byte("k"), ServerKey: []byte("k")}
	if got := verifierFor(user, stored).iterations; got != 4096 {
		t.Errorf("stored secret's count became %d", got)
	}
	SetSCRAMIterations(0)
	if got := adHocVerifier(user, "pw").iterations; got != DefaultSCRAMIterations {
		t.Errorf("SetSCRAMIterations(0) gave %d, want the default", got)
	}
}

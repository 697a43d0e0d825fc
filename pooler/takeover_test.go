package pooler

import "testing"

// TestAdoptNamedKeepsNames: statements a server taken over has keep their
// names, and the registry's next name comes after them.
func TestAdoptNamedKeepsNames(t *testing.T) {
	r := newStmtRegistry()
	d := r.adoptNamed("PGTS_41", "SELECT 1", nil)
	if d.name != "PGTS_41" || !d.validated.Load() {
		t.Fatalf("adopted %q validated=%v", d.name, d.validated.Load())
	}
	if again := r.adoptNamed("PGTS_41", "SELECT 1", nil); again != d {
		t.Error("the same statement adopted twice made two definitions")
	}
	if n := r.acquire("SELECT 2", nil, 0); n.name != "PGTS_42" {
		t.Errorf("next name = %q, want PGTS_42", n.name)
	}
	if same := r.acquire("SELECT 1", nil, 0); same != d {
		t.Error("a client's Parse of the adopted text made a new definition")
	}
}

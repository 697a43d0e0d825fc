package pooler

import (
	"testing"

	"github.com/pgturnstile/pgturnstile/internal/stmtcache"
	"github.com/pgturnstile/pgturnstile/internal/takeover"
)

// Online restart: a client's name whose description is older than its
// statement's shape stays refused in the new process; a current one stays
// current.
func TestMovedClientStmtKeepsStale(t *testing.T) {
	old := stmtcache.NewRegistry()
	d := old.Acquire("SELECT * FROM t", nil, 0)
	stale := stmtcache.NewClientStmt(d)
	d.BumpEpoch(0)
	fresh := stmtcache.NewClientStmt(d)

	r := stmtcache.NewRegistry()
	a := adoptClientStmt(r, movedClientStmt("fresh", fresh))
	if !a.Current() {
		t.Fatal("a current name came over stale")
	}
	b := adoptClientStmt(r, movedClientStmt("stale", stale))
	if b.Current() || b.Def != a.Def {
		t.Fatal("a stale name came over current")
	}
	// The same from a process that does not say (an older one).
	c := adoptClientStmt(r, takeover.Stmt{Name: "s", Query: "SELECT 2"})
	if !c.Current() {
		t.Fatal("a name without stale came over stale")
	}
}

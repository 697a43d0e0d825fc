package admin

import (
	"strconv"
	"testing"

	"github.com/pgturnstile/pgturnstile/admission"
)

// One pool's gate is a pool row, a row per tier named by the policy and a
// row per tree node, the root shown as "/".
func TestAdmissionRows(t *testing.T) {
	snap := admission.Snapshot{
		Capacity: 8, InUse: 5, Waiting: 2, Busy: 0.5, InUseSeconds: 10, CapacitySeconds: 20,
		Tiers: []admission.TierSnapshot{
			{Priority: 0, InUse: 4, Waiting: 0, Granted: 40, Demand: 3.5, Allowed: 8},
			{Priority: 1, InUse: 1, Waiting: 2, Debt: 2, LIFO: true, Shed: 7, Allowed: 4},
		},
		Nodes: []admission.NodeSnapshot{
			{Path: "", InUse: 5, Waiting: 2, Weight: 1, Ceiling: 1, Alloc: 8},
			{Path: "source=web", InUse: 5, Weight: 3, Ceiling: 1, Alloc: 6},
		},
	}
	rows := AdmissionRows("db", "u", snap, func(p int) string { return "p" + strconv.Itoa(p) })
	want := []AdmissionRow{
		{Database: "db", User: "u", Kind: "pool", Capacity: 8, InUse: 5, Waiting: 2, Busy: 0.5, InUseSeconds: 10, CapacitySeconds: 20},
		{Database: "db", User: "u", Kind: "tier", Name: "p0", InUse: 4, Mode: "fifo", Granted: 40, Demand: 3.5, Allowed: 8},
		{Database: "db", User: "u", Kind: "tier", Name: "p1", InUse: 1, Waiting: 2, Debt: 2, Mode: "lifo", Shed: 7, Allowed: 4},
		{Database: "db", User: "u", Kind: "node", Name: "/", InUse: 5, Waiting: 2, Weight: 1, Ceiling: 1, Alloc: 8},
		{Database: "db", User: "u", Kind: "node", Name: "source=web", InUse: 5, Weight: 3, Ceiling: 1, Alloc: 6},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows: %+v", len(rows), rows)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d: %+v\nwant %+v", i, rows[i], want[i])
		}
	}
}

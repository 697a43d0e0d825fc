package admin

import "github.com/pgturnstile/pgturnstile/admission"

// AdmissionRows are SHOW ADMISSION's rows for one pool's gate, read from
// its snapshot: the pool's row, then one per priority tier (named by
// priorityName, the policy's names), then one per node of the fair-share
// tree in the snapshot's preorder.
func AdmissionRows(database, user string, snap admission.Snapshot, priorityName func(int) string) []AdmissionRow {
	base := AdmissionRow{Database: database, User: user}
	out := make([]AdmissionRow, 0, 1+len(snap.Tiers)+len(snap.Nodes))
	row := base
	row.Kind, row.Capacity, row.InUse, row.Waiting = "pool", snap.Capacity, snap.InUse, snap.Waiting
	row.Busy, row.InUseSeconds, row.CapacitySeconds = snap.Busy, snap.InUseSeconds, snap.CapacitySeconds
	out = append(out, row)
	for _, t := range snap.Tiers {
		row := base
		row.Kind, row.Name = "tier", priorityName(t.Priority)
		row.InUse, row.Waiting, row.Debt, row.Mode = t.InUse, t.Waiting, t.Debt, "fifo"
		if t.LIFO {
			row.Mode = "lifo"
		}
		row.Granted, row.Shed = t.Granted, t.Shed
		row.Demand, row.Allowed = t.Demand, t.Allowed
		out = append(out, row)
	}
	for _, n := range snap.Nodes {
		row := base
		row.Kind, row.Name = "node", n.Path
		if row.Name == "" {
			row.Name = "/"
		}
		row.InUse, row.Waiting, row.Weight, row.Ceiling, row.Alloc = n.InUse, n.Waiting, n.Weight, n.Ceiling, n.Alloc
		out = append(out, row)
	}
	return out
}

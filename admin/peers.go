package admin

import "slices"

// SHOW PEERS and SHOW PEER_POOLS: the [peers] section, and the cancel
// requests forwarded to each peer (PgBouncer 1.23+ peering).
func init() {
	shows["peers"] = showCmd{cols: peersCols, rows: peersRows}
	shows["peer_pools"] = showCmd{cols: peerPoolsCols, rows: peerPoolsRows}
}

// peersRows lists [peers] by id, the process's own entry included, as
// PgBouncer does; pool_size is the entry's, else default_pool_size.
func peersRows(con Console) [][]value {
	cfg := con.Config()
	ids := make([]int, 0, len(cfg.Peers))
	for id := range cfg.Peers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([][]value, 0, len(ids))
	for _, id := range ids {
		p := cfg.Peers[id]
		size := p.PoolSize
		if size < 0 {
			size = cfg.Settings.DefaultPoolSize
		}
		out = append(out, []value{num(id), text(p.Host), num(p.Port), num(size)})
	}
	return out
}

// peerPoolsRows lists the peers a cancel request was forwarded to.
func peerPoolsRows(con Console) [][]value {
	pp, ok := con.(PeerPools)
	if !ok {
		return nil
	}
	var out [][]value
	for _, p := range pp.PeerPools() {
		out = append(out, []value{num(p.PeerID), num(p.ClActiveCancelReq), num(p.ClWaitingCancelReq),
			num(p.SvActiveCancel), num(p.SvLogin)})
	}
	return out
}

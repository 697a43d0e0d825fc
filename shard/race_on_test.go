//go:build race

package shard

// raceEnabled: under the race detector sync.Pool drops a share of what
// is put back on purpose, so a lent scanner is sometimes new and the
// allocation counts do not hold; they are checked in builds without it.
const raceEnabled = true

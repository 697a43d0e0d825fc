//go:build race

package wire

// raceEnabled: under the race detector sync.Pool drops a share of what is
// put back on purpose, so allocation counts of pooled buffers do not hold.
const raceEnabled = true

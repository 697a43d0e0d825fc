package auth

import "sync/atomic"

// scramIterations is scram_iterations: the iteration count of the SCRAM
// verifiers the pooler builds itself, for a plain-text password (ad hoc)
// and for a user who cannot pass (mock), as PgBouncer's
// cf_scram_iterations. Stored secrets keep their own count. It is one
// value per process, as the setting is; the pooler sets it with every
// configuration it applies.
var scramIterations atomic.Int32

func init() { scramIterations.Store(DefaultSCRAMIterations) }

// SetSCRAMIterations sets scram_iterations; n < 1 means the default.
func SetSCRAMIterations(n int) {
	if n < 1 || n > maxSCRAMIterations {
		n = DefaultSCRAMIterations
	}
	scramIterations.Store(int32(n))
}

// builtIterations is the iteration count for a verifier built here.
func builtIterations() int { return int(scramIterations.Load()) }

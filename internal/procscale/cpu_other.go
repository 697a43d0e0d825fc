//go:build !unix

package procscale

import "time"

// canMeasure is false: without getrusage the scaler stays off.
const canMeasure = false

func processCPU() time.Duration { return 0 }

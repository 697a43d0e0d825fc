package pooler

import "github.com/pgturnstile/pgturnstile/internal/pgerror"

// Error is internal/pgerror's Error under the name prepared.go's reply
// queue (op.err) still uses: that file is being moved out of the package
// on its own branch (issue 33), and this alias goes with that move. Every
// other file names pgerror.Error.
type Error = pgerror.Error

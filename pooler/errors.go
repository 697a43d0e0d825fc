package pooler

import "github.com/pgturnstile/pgturnstile/internal/pgerror"

// Error is internal/pgerror's Error under the name prepared.go's reply
// queue (op.err) still uses, as that file was left to the branch that
// moved the statement books out (issue 33); the alias goes once that line
// names pgerror.Error, as every other file does.
type Error = pgerror.Error

package classify

import (
	"strconv"
	"strings"

	"github.com/pgturnstile/pgturnstile/admission"
)

// The words a policy's classes are told in: to a client whose startup
// options it did not take as written, to a client the gate shed, and in
// the metrics' labels. They name tiers and categories by the policy's own
// names, which is why they are the Policy's.

// ShedMessage and ShedHint are the ERROR a shed client gets (SQLSTATE:
// ShedSQLState; DETAIL: ShedDetail). The client stays connected.
const (
	ShedMessage = "pgturnstile: transaction rejected by admission control (overloaded)"
	ShedHint    = "The database is shedding load; retry after a randomized backoff."
)

// CategoryLabel is a leaf's path for DETAIL and metrics ("default" for
// the single-leaf tree).
func (p *Policy) CategoryLabel(leaf admission.LeafID) string {
	if path := p.tree.LeafPath(leaf); path != "" {
		return path
	}
	return "default"
}

// ShedDetail is the machine-readable DETAIL of a shed: why, the class by
// the policy's names, how long the request waited and a retry hint, in
// key=value words a client can parse.
func (p *Policy) ShedDetail(e *admission.ShedError) string {
	return "reason=" + e.Reason.String() +
		" priority=" + p.PriorityName(e.Class.Priority) +
		" category=" + p.CategoryLabel(e.Class.Leaf) +
		" waited_ms=" + strconv.FormatInt(e.Waited.Milliseconds(), 10) +
		" retry_after_ms=" + strconv.FormatInt(e.RetryAfter.Milliseconds(), 10)
}

// OptionNotice is the NOTICE a client is sent at login for is: its text
// and a DETAIL listing what the policy does take (the keys, or the
// priorities), empty when the text says it all.
func (p *Policy) OptionNotice(is OptionIssue) (msg, detail string) {
	switch is.Reason {
	case IssueUnknownKey:
		msg = "unknown admission option pgturnstile." + is.Key + " ignored"
		keys := append([]string{"priority", "category"}, p.tree.Levels()...)
		detail = "The keys are " + strings.Join(keys, ", ") + "."
	case IssueBadPriority:
		msg = "admission option pgturnstile.priority=" + is.Value + " names no priority, ignored"
		names := make([]string, p.Tiers())
		for i := range names {
			names[i] = p.PriorityName(i)
		}
		detail = "The priorities are " + strings.Join(names, ", ") + "."
	case IssueClampedPriority:
		msg = "admission priority " + is.Value + " is above the allowed " + is.Max + ", lowered to " + is.Max
	}
	return msg, detail
}

package throttle

import "context"

// Priority tiers, 0 the most important, as in the pooler's admission gate and
// in bradenaw/backpressure. A Throttle built with Priorities(n) accepts 0…n−1;
// these names fit the default of four.
const (
	Critical = 0
	High     = 1 // the default: user-visible traffic
	Medium   = 2
	Low      = 3 // batch work, the first to be throttled
)

// DefaultCategory is what CategoryFrom returns for an untagged context; it is
// also the pooler's default category.
const DefaultCategory = "default"

type priorityKey struct{}
type categoryKey struct{}

// WithPriority returns a context whose operations the Throttle accounts, gates
// and reports at priority p. It only tags the client side: the pooler learns a
// priority from the connection (options=-c pgturnstile.priority=…,
// application_name) or from a comment on the statement, so keep the two
// consistent (see the package documentation).
func WithPriority(ctx context.Context, p int) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityFrom returns the priority set by WithPriority, or High when there is
// none: like the pooler, untagged traffic is treated as user-visible.
func PriorityFrom(ctx context.Context) int {
	if p, ok := ctx.Value(priorityKey{}).(int); ok {
		return p
	}
	return High
}

// WithCategory returns a context tagged with a category. The Throttle keeps
// its statistics per priority only (a category is a fairness label for the
// pooler, not an overload signal of its own); the category appears in the
// DETAIL of local rejections so that logs read like the pooler's sheds.
func WithCategory(ctx context.Context, c string) context.Context {
	return context.WithValue(ctx, categoryKey{}, c)
}

// CategoryFrom returns the category set by WithCategory, or DefaultCategory.
func CategoryFrom(ctx context.Context) string {
	if c, ok := ctx.Value(categoryKey{}).(string); ok && c != "" {
		return c
	}
	return DefaultCategory
}

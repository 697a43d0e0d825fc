package admin

import (
	"slices"

	"github.com/pgturnstile/pgturnstile/config"
)

// Role is what a console login may do.
type Role int

const (
	// RoleStats may run SHOW commands, except SHOW FDS (stats_users).
	RoleStats Role = iota + 1
	// RoleAdmin may run everything (admin_users, and the Unix-socket
	// login as user "pgbouncer" by the OS user running the pooler).
	RoleAdmin
)

func (r Role) String() string {
	switch r {
	case RoleStats:
		return "stats"
	case RoleAdmin:
		return "admin"
	}
	return "none"
}

// RoleFor decides, at login to database "pgbouncer", what user may do; false
// means the login is refused with FATAL "not allowed". It follows
// PgBouncer's admin_pre_login/admin_post_login:
//
//   - a name in admin_users is RoleAdmin, one in stats_users RoleStats
//     (names compare case-sensitively, as strlist_contains does);
//   - under auth_type=any every login is accepted (the name is not checked
//     against any password), and a name in neither list gets RoleStats.
//
// The Unix-socket rule (user "pgbouncer" connecting from the pooler's own
// OS user is RoleAdmin, no password) needs the peer credentials, so the
// pooler applies it itself before calling RoleFor.
func RoleFor(cfg *config.Config, user string) (Role, bool) {
	s := &cfg.Settings
	if slices.Contains(s.AdminUsers, user) {
		return RoleAdmin, true
	}
	if slices.Contains(s.StatsUsers, user) {
		return RoleStats, true
	}
	if s.AuthType == "any" {
		return RoleStats, true
	}
	return 0, false
}

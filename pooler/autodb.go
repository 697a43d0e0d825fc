package pooler

import "github.com/pgturnstile/pgturnstile/config"

// registerAutoDB reports whether name is a database served from the "*"
// entry that no client has used before: PgBouncer logs "registered new
// auto-database" then (objects.c), and operators and its suite look for
// that line. autodb_idle_timeout unregisters a database with its pools
// (poolfree.go); it is then reported again on its next use.
func (s *Service) registerAutoDB(cfg *config.Config, name string) bool {
	if _, listed := cfg.Databases[name]; listed {
		return false
	}
	if _, star := cfg.Databases["*"]; !star {
		return false
	}
	_, seen := s.autoDBs.LoadOrStore(name, struct{}{})
	return !seen
}

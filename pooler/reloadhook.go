package pooler

import "github.com/pgturnstile/pgturnstile/config"

// WithReloadHook has fn called after every RELOAD, from the console or
// SIGHUP, with the settings in force. The command reopens its logfile and
// syslog connection there, as PgBouncer does after each load_config
// (reset_logging), so that `mv pgbouncer.log pgbouncer.log.1; kill -HUP`
// rotates the log. fn runs whether the new file was taken or refused: a
// rotation must not depend on the config file being valid.
func WithReloadHook(fn func(*config.Settings)) Option {
	return func(s *Service) { s.afterReload = fn }
}

// reloaded runs the reload hook, if any.
func (s *Service) reloaded() {
	if s.afterReload != nil {
		s.afterReload(s.settings())
	}
}

// Settings returns the [pgbouncer] settings in force. The command's log
// handler reads log_format from it per line, so that SET and RELOAD take
// effect from the next line.
func (s *Service) Settings() *config.Settings { return s.settings() }

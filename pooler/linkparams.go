package pooler

import (
	"strings"

	"github.com/pgturnstile/pgturnstile/internal/pgerror"
	"github.com/pgturnstile/pgturnstile/internal/pgsetting"
)

// The server's tracked parameters brought to the client's before a link
// (linkServer, through syncParamsUnlessMatch): SET, set_config or RESET,
// and the canonical spellings Postgres reports back.

// syncParams brings the server's tracked parameters to the client's
// values before a link. A reported parameter whose server value differs
// (PgBouncer compares case-insensitively) gets PgBouncer's "SET
// name='value';"; the values the server reports back are the canonical
// ones (DateStyle ISO is "ISO, MDY"): the client takes them
// (setCanonical), or the next checkout would SET them again.
//
// A parameter Postgres does not report is compared with what the pooler
// last applied on this server (server.unreported), exactly: "Sp" and "sp"
// name different schemas once quoted. One the client does not carry but an
// earlier client had set goes back to its default with RESET, so no value
// passes from one client to the next.
func (l *link) syncParams(s *server) error {
	c := l.c
	var sb strings.Builder
	for name, want := range c.params {
		if have, reported := s.params[name]; reported {
			if pgsetting.Same(have, want) {
				continue
			}
		} else if have, ok := s.unreported[name]; ok && have == want && !s.unreportedDirty {
			continue
		}
		pgsetting.AppendSet(&sb, name, want)
	}
	for name, have := range s.unreported {
		if _, carried := c.params[name]; !carried && (have != unreportedDefault || s.unreportedDirty) {
			sb.WriteString("RESET ")
			sb.WriteString(pgsetting.QuoteIdent(name))
			sb.WriteString(";")
		}
	}
	if sb.Len() == 0 {
		s.unreportedDirty = false
		s.syncedWith, s.syncedGen = c.params, s.paramsGen
		return nil
	}
	s.pool.serverDebugf(s, "varcache_apply: %s", sb.String())
	res, err := s.exec(sb.String(), c.svc.settings().ServerConnectTimeout)
	if err != nil {
		return err
	}
	if res.err != nil {
		return &pgerror.Error{Severity: "FATAL", SQLState: res.err.Code, Message: res.err.Message}
	}
	// What Postgres did not answer with a ParameterStatus is now as sent.
	for name, want := range c.params {
		if _, reported := s.params[name]; !reported {
			if s.unreported == nil {
				s.unreported = make(map[string]string, 1)
			}
			s.unreported[name] = want
		}
	}
	for name := range s.unreported {
		if _, carried := c.params[name]; !carried {
			s.unreported[name] = unreportedDefault
		}
	}
	s.unreportedDirty = false
	s.paramsGen++
	l.setCanonical(s)
	return nil
}

// unreportedDefault marks a parameter of server.unreported that was RESET:
// a startup value cannot hold a NUL byte.
const unreportedDefault = "\x00"

// setCanonical gives the client the server's spelling of each tracked
// value that differs only in form after a SET, as PgBouncer's
// varcache_set_canonical does: Postgres sends no ParameterStatus when the
// value it holds is the canonical form of the one set.
func (l *link) setCanonical(s *server) {
	c := l.c
	for name, have := range c.params {
		canon, ok := s.params[name]
		if !ok || canon == have {
			continue
		}
		c.debugf("varcache_set_canonical: setting %s to its canonical version %s -> %s", name, have, canon)
		c.mu.Lock()
		c.setParamLocked(name, canon)
		c.mu.Unlock()
	}
}

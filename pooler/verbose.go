package pooler

import (
	"context"
	"fmt"
	"log/slog"
)

// PgBouncer's verbosity: verbose (the setting, SET at runtime) plus one
// for each -v on the command line. At 1 (-v) DEBUG lines are logged, at 2
// (-vv) NOISE lines too, with PgBouncer's texts where it has them:
//
//	DEBUG  a client's startup parameters ("got var", "received options",
//	       "got var from options", "ignoring startup parameter …"), its
//	       login ("logged in"), a server login being launched, the SET
//	       that brings a server's parameters in line with a client's
//	       ("varcache_apply: SET …") and the canonical values taken back
//	       ("varcache_set_canonical: …")
//	NOISE  each server assignment ("linking client to S-n")
//
// The hot path asks debugOn/noiseOn before it builds a line, so verbose=0
// costs an atomic load per assignment.

// LevelNoise is PgBouncer's NOISE, below slog's DEBUG.
const LevelNoise = slog.LevelDebug - 4

// WithVerbose adds n (the command line's -v count) to the verbose setting.
func WithVerbose(n int) Option {
	return func(s *Service) { s.cmdVerbose = n }
}

// Verbose is the verbosity in force: the verbose setting plus -v's. A log
// handler reads it to decide which levels to write.
func (s *Service) Verbose() int { return s.cmdVerbose + s.settings().Verbose }

func (s *Service) debugOn() bool { return s.Verbose() >= 1 }
func (s *Service) noiseOn() bool { return s.Verbose() >= 2 }

// debugf logs a DEBUG line about the client, with its prefix attributes
// (logprefix.go), when -v or verbose asks for it.
//
// On a path every login takes, guard the call with c.svc.debugOn(): the
// arguments are boxed, and allocated, before debugf looks at the level.
func (c *client) debugf(format string, args ...any) {
	if c.svc.debugOn() {
		c.logAt(slog.LevelDebug, fmt.Sprintf(format, args...))
	}
}

// noisef is debugf at NOISE (-vv, verbose=2).
func (c *client) noisef(format string, args ...any) {
	if c.svc.noiseOn() {
		c.logAt(LevelNoise, fmt.Sprintf(format, args...))
	}
}

func (c *client) logAt(level slog.Level, text string) {
	c.logger().Log(context.Background(), level, text)
}

// serverDebugf logs a DEBUG line about server s with its prefix
// ("S-n: db/user@addr text").
func (p *serverPool) serverDebugf(s *server, format string, args ...any) {
	if p.svc.debugOn() {
		p.serverLogger(s).Debug(fmt.Sprintf(format, args...))
	}
}

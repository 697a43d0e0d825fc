package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/pgturnstile/pgturnstile/pooler"
)

// -v and -vv: DEBUG lines at verbosity 1, NOISE lines at 2, in PgBouncer's
// level words, and the verbosity is read per line, so the service's (the
// verbose setting, SET on the console) takes effect at once.
func TestHandlerVerbosity(t *testing.T) {
	var out bytes.Buffer
	h := newHandler(&out, 0)
	log := slog.New(h)
	logAll := func() string {
		out.Reset()
		log.Info("info line")
		log.Debug("debug line")
		log.Log(context.Background(), pooler.LevelNoise, "noise line")
		return out.String()
	}
	v := 0
	h.setVerbose(func() int { return v })
	for _, c := range []struct {
		verbose   int
		want, not []string
	}{
		{0, []string{"LOG info line"}, []string{"debug line", "noise line"}},
		{1, []string{"LOG info line", "DEBUG debug line"}, []string{"noise line"}},
		{2, []string{"LOG info line", "DEBUG debug line", "NOISE noise line"}, nil},
	} {
		v = c.verbose
		got := logAll()
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("verbose %d: no %q in\n%s", c.verbose, w, got)
			}
		}
		for _, n := range c.not {
			if strings.Contains(got, n) {
				t.Errorf("verbose %d: %q logged:\n%s", c.verbose, n, got)
			}
		}
	}
}

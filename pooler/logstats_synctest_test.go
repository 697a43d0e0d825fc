package pooler

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// log_stats (on by default, as PgBouncer) logs PgBouncer's "stats:" line
// every stats_period with all pools' averages over it: ten transactions in
// a 10 s period are 1 xacts/s and 1 queries/s; log_stats = 0 logs none.
func TestTimingLogStatsLine(t *testing.T) {
	line := regexp.MustCompile(`stats: (\d+) xacts/s, (\d+) queries/s, \d+ client parses/s, \d+ server parses/s, \d+ binds/s, in (\d+) B/s, out (\d+) B/s, xact \d+ us, query \d+ us, wait \d+ us`)
	for _, tc := range []struct {
		name, settings string
		want           bool
	}{
		{"on", "", true},
		{"off", "log_stats = 0\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := startTimingRig(t, "pool_mode = transaction\nstats_period = 10\n"+tc.settings)
				c := r.connect("u", nil)
				for i := 0; i < 10; i++ {
					if rep := c.query("SELECT " + strconv.Itoa(i)); !rep.ready || rep.err != nil {
						t.Fatalf("query %d: %v", i, rep)
					}
				}
				r.sleepUntil(10*time.Second + 500*time.Millisecond)
				m := line.FindStringSubmatch(r.log.String())
				if !tc.want {
					if m != nil || strings.Contains(r.log.String(), "stats: ") {
						t.Fatalf("log_stats = 0 logged a stats line:\n%s", r.log.String())
					}
					return
				}
				if m == nil {
					t.Fatalf("no stats line after one stats_period:\n%s", r.log.String())
				}
				if m[1] != "1" || m[2] != "1" {
					t.Errorf("stats line says %s xacts/s, %s queries/s; want 1 and 1 (10 in 10 s)", m[1], m[2])
				}
				if in, _ := strconv.Atoi(m[3]); in == 0 {
					t.Errorf("stats line says in 0 B/s after 10 queries: %s", m[0])
				}
			})
		})
	}
}

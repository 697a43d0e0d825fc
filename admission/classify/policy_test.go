package classify

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/admission"
	"github.com/pgturnstile/pgturnstile/config"
)

// testPolicy has two levels: source (web, batch) and, under web, endpoint
// (search, comments). Its leaves, in the tree's order:
//
//	0 source=web/endpoint=search
//	1 source=web/endpoint=comments
//	2 source=web/endpoint=other
//	3 source=batch
//	4 source=other
const testPolicy = `
[priorities]
names = ["critical", "high", "medium", "low"]
default = "high"

[tree]
levels = ["source", "endpoint"]
[[tree.node]]
path = "source=web"
weight = 3
[[tree.node]]
path = "source=web/endpoint=search"
[[tree.node]]
path = "source=web/endpoint=comments"
[[tree.node]]
path = "source=batch"
ceiling = 0.5

[[rule]]
application_name = "batch-*"
priority = "low"
category = { source = "batch" }
[[rule]]
user = "web"
category = { source = "web" }
[[rule]]
user = "admin"
priority = "critical"
[[rule]]
user = "report?"
database = "dw"
priority = "medium"
category = { source = "batch", endpoint = "search" }

[users.web]
max_priority = "high"
[users.capped]
max_priority = "medium"
`

func mustPolicy(t testing.TB, toml string) *Policy {
	t.Helper()
	cfg, err := config.ParseAdmission([]byte(toml), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// class prints a class as "priority leafpath".
func class(p *Policy, c admission.Class) string {
	return p.PriorityName(c.Priority) + " " + p.Tree().LeafPath(c.Leaf)
}

// session prints a session as "priority/max leafpath".
func session(p *Policy, s Session) string {
	return p.PriorityName(s.Priority()) + "/" + p.PriorityName(s.MaxPriority()) + " " + p.Tree().LeafPath(s.Leaf())
}

func TestTreeLeaves(t *testing.T) {
	p := mustPolicy(t, testPolicy)
	var got []string
	for l := range p.Tree().Leaves() {
		got = append(got, p.Tree().LeafPath(admission.LeafID(l)))
	}
	want := "source=web/endpoint=search source=web/endpoint=comments source=web/endpoint=other source=batch source=other"
	if strings.Join(got, " ") != want {
		t.Fatalf("leaves %q", got)
	}
}

func TestSession(t *testing.T) {
	p := mustPolicy(t, testPolicy)
	for _, tc := range []struct {
		user, db, app string
		opts          []OptionTag
		want          string
	}{
		{"u", "db", "psql", nil, "high/high source=other"},
		{"web", "db", "x", nil, "high/high source=web/endpoint=other"},
		// The first rule wins even over a user's own: web runs a batch.
		{"web", "db", "batch-1", nil, "low/high source=batch"},
		{"u", "db", "batch-", nil, "low/low source=batch"},
		{"u", "db", "batch/1", nil, "high/high source=other"}, // '*' does not match '/'
		{"admin", "db", "", nil, "critical/critical source=other"},
		{"report1", "dw", "", nil, "medium/medium source=batch"}, // endpoint is not under batch
		{"report1", "db", "", nil, "high/high source=other"},
		{"report12", "dw", "", nil, "high/high source=other"},
		// max_priority clamps the rules too.
		{"capped", "db", "", nil, "medium/medium source=other"},

		// options lower, and raise up to the maximum
		{"u", "db", "", []OptionTag{{"priority", "low"}}, "low/high source=other"},
		{"u", "db", "", []OptionTag{{"priority", "critical"}}, "high/high source=other"},
		{"u", "db", "", []OptionTag{{"priority", "3"}}, "low/high source=other"},
		{"u", "db", "", []OptionTag{{"priority", "4"}}, "high/high source=other"},
		{"u", "db", "", []OptionTag{{"priority", "Low"}}, "high/high source=other"},
		{"u", "db", "", []OptionTag{{"priority", ""}}, "high/high source=other"},
		{"u", "db", "", []OptionTag{{"priority", "low"}, {"priority", "medium"}}, "medium/high source=other"},
		{"web", "db", "batch-1", []OptionTag{{"priority", "high"}}, "high/high source=batch"},
		{"web", "db", "batch-1", []OptionTag{{"priority", "critical"}}, "high/high source=batch"},
		{"u", "db", "batch-1", []OptionTag{{"priority", "high"}}, "low/low source=batch"},
		{"capped", "db", "", []OptionTag{{"priority", "0"}}, "medium/medium source=other"},

		// categories
		{"u", "db", "", []OptionTag{{"source", "web"}, {"endpoint", "search"}}, "high/high source=web/endpoint=search"},
		{"web", "db", "", []OptionTag{{"endpoint", "comments"}}, "high/high source=web/endpoint=comments"},
		{"web", "db", "", []OptionTag{{"source", "nope"}}, "high/high source=other"},
		{"u", "db", "", []OptionTag{{"category", "web/comments"}}, "high/high source=web/endpoint=comments"},
		{"u", "db", "", []OptionTag{{"category", "endpoint=search/source=web"}}, "high/high source=web/endpoint=search"},
		{"web", "db", "", []OptionTag{{"category", "/search"}}, "high/high source=web/endpoint=search"},
		{"u", "db", "", []OptionTag{{"category", "web/search/x"}}, "high/high source=other"},
		{"u", "db", "", []OptionTag{{"category", "web/tier=x"}}, "high/high source=other"},
		{"u", "db", "batch-2", []OptionTag{{"category", "web"}}, "low/low source=web/endpoint=other"},
		{"u", "db", "", []OptionTag{{"foo", "bar"}, {"source", strings.Repeat("w", 600)}}, "high/high source=other"},
	} {
		s := p.Session(tc.user, tc.db, tc.app, tc.opts)
		if got := session(p, s); got != tc.want {
			t.Errorf("Session(%q, %q, %q, %q) = %s, want %s", tc.user, tc.db, tc.app, tc.opts, got, tc.want)
		}
	}
}

func TestClassifyTagClamps(t *testing.T) {
	p := mustPolicy(t, testPolicy)
	for _, tc := range []struct {
		user, app, sql, want string
	}{
		{"u", "", "SELECT 1", "high source=other"},
		{"u", "", "/* pgturnstile: priority=low */ SELECT 1", "low source=other"},
		{"u", "", "/* pgturnstile: priority=critical */ SELECT 1", "high source=other"},
		{"admin", "", "/* pgturnstile: priority=critical */ SELECT 1", "critical source=other"},
		{"admin", "", "/* pgturnstile: priority=3 */ SELECT 1", "low source=other"},
		{"capped", "", "/* pgturnstile: priority=high */ SELECT 1", "medium source=other"},
		{"web", "batch-1", "/* pgturnstile: priority=high */ SELECT 1", "high source=batch"},
		{"u", "batch-1", "/* pgturnstile: priority=medium */ SELECT 1", "low source=batch"},
		{"web", "", "/* pgturnstile: endpoint=search */ SELECT 1", "high source=web/endpoint=search"},
		{"web", "", "SELECT 1 /*endpoint='comments',priority='medium'*/", "medium source=web/endpoint=comments"},
		{"web", "", "/* pgturnstile: source=batch */ SELECT 1", "high source=batch"},
		{"web", "", "/* pgturnstile: source=x */ SELECT 1", "high source=other"},
		{"u", "batch-1", "/* pgturnstile: category=web/search */ SELECT 1", "low source=web/endpoint=search"},
		{"u", "", "/* pgturnstile: priority=urgent */ SELECT 1", "high source=other"},
	} {
		s := p.Session(tc.user, "db", tc.app, nil)
		if got := class(p, p.Classify(&s, []byte(tc.sql))); got != tc.want {
			t.Errorf("%s/%s %q: %s, want %s", tc.user, tc.app, tc.sql, got, tc.want)
		}
		// A prepared statement tagged at Parse gives the same class.
		tag, ok := p.TagOf([]byte(tc.sql))
		if got := class(p, p.ClassifyTag(&s, tag, ok)); got != tc.want {
			t.Errorf("%s/%s %q via TagOf: %s, want %s", tc.user, tc.app, tc.sql, got, tc.want)
		}
	}
}

// TestForeign: Sessions and Tags of another Policy (or zero ones) never give
// a class out of range or more important than they held.
func TestForeign(t *testing.T) {
	p := mustPolicy(t, testPolicy)
	old := mustPolicy(t, testPolicy)
	oldS := old.Session("admin", "db", "", nil)
	ot, ok := old.TagOf([]byte("/* pgturnstile: priority=low, source=web */"))
	if !ok {
		t.Fatal("no tag")
	}
	s := p.Session("u", "db", "", nil)
	if got := class(p, p.ClassifyTag(&s, ot, true)); got != "high source=other" {
		t.Errorf("foreign tag: %s", got)
	}
	if got := class(p, p.ClassifyTag(&oldS, Tag{}, false)); got != "high source=other" {
		t.Errorf("foreign critical session: %s", got)
	}
	low := old.Session("u", "db", "batch-1", nil)
	if got := class(p, p.ClassifyTag(&low, Tag{}, false)); got != "low source=other" {
		t.Errorf("foreign low session: %s", got)
	}
	var zero Session
	if got := class(p, p.Classify(&zero, []byte("/* pgturnstile: priority=critical */"))); got != "high source=other" {
		t.Errorf("zero session: %s", got)
	}
	// A zero Tag claiming ok changes nothing.
	if got := class(p, p.ClassifyTag(&s, Tag{}, true)); got != "high source=other" {
		t.Errorf("zero tag: %s", got)
	}
	// A policy with fewer tiers clamps a foreign session into range.
	two := mustPolicy(t, "[priorities]\nnames = [\"a\", \"b\"]\ndefault = \"a\"\n")
	if c := two.ClassifyTag(&low, Tag{}, false); c.Priority != 1 || c.Leaf != 0 {
		t.Errorf("two tiers: %+v", c)
	}
}

func TestDefaultPolicy(t *testing.T) {
	cfg, err := config.ParseAdmission(nil, "none")
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.Tiers() != 4 || p.DefaultPriority() != 1 || p.Tree().Leaves() != 1 {
		t.Fatalf("tiers %d default %d leaves %d", p.Tiers(), p.DefaultPriority(), p.Tree().Leaves())
	}
	s := p.Session("u", "d", "a", []OptionTag{{"category", "x"}, {"source", "y"}})
	for sql, want := range map[string]string{
		"SELECT 1":                               "high ",
		"/* pgturnstile: category=x */ SELECT 1": "high ",
		"/* pgturnstile: priority=low, category=x */ SELECT": "low ",
		"SELECT 1 /*priority='critical'*/":                   "high ",
	} {
		if got := class(p, p.Classify(&s, []byte(sql))); got != want {
			t.Errorf("%q: %q, want %q", sql, got, want)
		}
	}
	if _, ok := p.TagOf([]byte("/* pgturnstile: category=x */")); ok {
		t.Error("a category without levels is a tag")
	}
}

func TestAccessors(t *testing.T) {
	cfg, err := config.ParseAdmission([]byte(`
[priorities]
names = ["a", "b", "c"]
short_timeout = "20ms"
long_timeout = "300ms"
debt_decay_interval = "4s"
debt_forgive_per_success = 0.5
shed_sqlstate = "53300"
`), "x.toml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%d %d %s %s %s %s %q %q %q %q",
		p.Tiers(), p.DefaultPriority(), p.Short(), p.Long(), p.DebtDecay(), p.ShedSQLState(),
		p.PriorityName(0), p.PriorityName(2), p.PriorityName(3), p.PriorityName(-1))
	if want := `3 1 20ms 300ms 4s 53300 "a" "c" "3" "-1"`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	gc := p.GateConfig()
	if gc.Tiers != 3 || gc.Short != 20*time.Millisecond || gc.Long != 300*time.Millisecond ||
		gc.DebtDecay != 4*time.Second || gc.Tree != p.Tree() {
		t.Errorf("GateConfig %+v", gc)
	}
}

func TestNewErrors(t *testing.T) {
	good := func() *config.AdmissionPolicy {
		cfg, err := config.ParseAdmission([]byte(testPolicy), "t.toml")
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	for _, tc := range []struct {
		edit func(*config.AdmissionPolicy)
		want string
	}{
		{func(c *config.AdmissionPolicy) { c.Priorities = nil }, "classify: 0 priorities, want 1 to 8"},
		{func(c *config.AdmissionPolicy) { c.Priorities = make([]string, 9) }, "classify: 9 priorities, want 1 to 8"},
		{func(c *config.AdmissionPolicy) { c.DefaultPriority = 4 }, "classify: default priority 4 out of range"},
		{func(c *config.AdmissionPolicy) { c.Levels = []string{"a", "b", "c", "d", "e"} }, "classify: 5 levels, want at most 4"},
		{func(c *config.AdmissionPolicy) { c.Nodes[1].Weight = -1 }, `classify: admission tree: node "web/search": weight -1 must be > 0`},
		{func(c *config.AdmissionPolicy) { c.Rules[2].Priority = 7 }, "classify: rule at line 26: priority 7 out of range"},
		{func(c *config.AdmissionPolicy) { c.Rules[0].Category = []string{"x"} }, "classify: rule at line 19: 1 category values for 2 levels"},
		{func(c *config.AdmissionPolicy) { c.Users["web"] = config.AdmissionUser{MaxPriority: -2} }, `classify: user "web": max priority -2 out of range`},
	} {
		cfg := good()
		tc.edit(cfg)
		_, err := New(cfg)
		if err == nil || err.Error() != tc.want {
			t.Errorf("got %v, want %s", err, tc.want)
		}
	}
	if _, err := New(nil); err == nil || err.Error() != "classify: no policy" {
		t.Errorf("nil: %v", err)
	}
}

// TestNoAllocs: the per-transaction paths and Session do not allocate.
func TestNoAllocs(t *testing.T) {
	p := mustPolicy(t, testPolicy)
	opts := []OptionTag{{"priority", "low"}, {"category", "web/search"}, {"endpoint", "comments"}}
	s := p.Session("web", "db", "app", opts)
	queries := [][]byte{
		[]byte("SELECT 1"),
		[]byte("/* pgturnstile: priority=low, category=web/search */ SELECT 1"),
		[]byte("SELECT * FROM t WHERE id = $1 /*action='%2Fx',endpoint='comments',priority='medium',traceparent='00-ab-cd-01'*/;"),
		[]byte(strings.Repeat("x", 4096) + " /*source='batch'*/"),
	}
	tag, ok := p.TagOf(queries[1])
	var sink admission.Class
	for name, f := range map[string]func(){
		"Session":     func() { s = p.Session("web", "db", "batch-1", opts) },
		"SessionNone": func() { s = p.Session("report1", "dw", "", nil) },
		"ClassifyTag": func() { sink = p.ClassifyTag(&s, tag, ok) },
		"Classify": func() {
			for _, q := range queries {
				sink = p.Classify(&s, q)
			}
		},
	} {
		if n := testing.AllocsPerRun(200, f); n != 0 {
			t.Errorf("%s: %v allocations per run", name, n)
		}
	}
	_ = sink
}

func BenchmarkClassify(b *testing.B) {
	p := mustPolicy(b, testPolicy)
	s := p.Session("web", "db", "app", nil)
	for _, q := range []struct{ name, sql string }{
		{"untagged", "SELECT * FROM t WHERE id = $1"},
		{"leading", "/* pgturnstile: priority=low, endpoint=search */ SELECT * FROM t WHERE id = $1"},
		{"trailing", "SELECT * FROM t WHERE id = $1 /*endpoint='search',priority='low',traceparent='00-5bd66ef5095369c7b0d1f8f4bd33716a-c532cb4098ac3dd2-01'*/"},
	} {
		sql := []byte(q.sql)
		b.Run(q.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Classify(&s, sql)
			}
		})
	}
}

// OptionIssues lists the startup options Session ignores or changes, so
// that the pooler can say so at login.
func TestOptionIssues(t *testing.T) {
	p := mustPolicy(t, testPolicy)
	for _, tc := range []struct {
		user, app string
		opts      []OptionTag
		want      string
	}{
		{"u", "", []OptionTag{{"priority", "low"}, {"source", "web"}, {"endpoint", "search"}, {"category", "web/search"}}, ""},
		{"u", "", []OptionTag{{"priority", "high"}}, ""}, // its maximum
		{"u", "", []OptionTag{{"priority", "critical"}}, "clamped_priority priority=critical max=high"},
		{"capped", "", []OptionTag{{"priority", "0"}}, "clamped_priority priority=0 max=medium"},
		{"u", "batch-1", []OptionTag{{"priority", "medium"}}, "clamped_priority priority=medium max=low"},
		{"admin", "", []OptionTag{{"priority", "critical"}}, ""},
		{"u", "", []OptionTag{{"priority", "urgent"}}, "bad_priority priority=urgent max="},
		{"u", "", []OptionTag{{"tier", "x"}, {"catgory", "web"}}, "unknown_key tier=x max=; unknown_key catgory=web max="},
	} {
		var got []string
		for _, is := range p.OptionIssues(tc.user, "db", tc.app, tc.opts) {
			got = append(got, is.Reason+" "+is.Key+"="+is.Value+" max="+is.Max)
		}
		if s := strings.Join(got, "; "); s != tc.want {
			t.Errorf("OptionIssues(%q, %q, %v) = %q, want %q", tc.user, tc.app, tc.opts, s, tc.want)
		}
	}
}

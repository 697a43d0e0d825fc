package classify

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/pgturnstile/pgturnstile/config"
)

// describe prints what a tag asks for: "priority=NAME" and "LEVEL=VALUE"
// ("LEVEL=?" for an undeclared value), or "-" for no tag.
func describe(p *Policy, t Tag, ok bool) string {
	if !ok {
		return "-"
	}
	var parts []string
	if t.prio > 0 {
		parts = append(parts, "priority="+p.PriorityName(int(t.prio-1)))
	}
	for l, name := range p.levels {
		if t.set&(1<<l) != 0 {
			v := p.values[l][t.vals[l]]
			if v == "" {
				v = "?"
			}
			parts = append(parts, name+"="+v)
		}
	}
	return strings.Join(parts, " ")
}

func TestTagOf(t *testing.T) {
	p := mustPolicy(t, testPolicy)
	for _, tc := range []struct{ sql, want string }{
		// leading
		{"/* pgturnstile: priority=low, category=web/search */ SELECT 1", "priority=low source=web endpoint=search"},
		{" \n\t/*pgturnstile:priority=2*/SELECT 1", "priority=medium"},
		{"/* pgturnstile: source=batch */ select 1", "source=batch"},
		{"/* pgturnstile: priority=low source=web */", "priority=low source=web"},
		{"/* pgturnstile:\n  priority=low,\n  endpoint=comments\n*/\nSELECT 1", "priority=low endpoint=comments"},
		{"/* pgturnstile: category=source=web/endpoint=comments */", "source=web endpoint=comments"},
		{"/* pgturnstile: category=nope */", "source=?"},
		{"/* pgturnstile: endpoint=se%61rch */", "endpoint=search"},
		{"/* pgturnstile: priority='low' */", "priority=low"},
		{"/* pgturnstile: priority=0 */", "priority=critical"},
		{"/* pgturnstile: priority=low, foo=bar */ SELECT 1", "priority=low"},
		{"/* pgturnstile: priority=low, priority=medium */", "priority=medium"},
		{"/* pgturnstile: priority=low,,, */", "priority=low"},
		{"/* pgturnstile: priority=urgent */ SELECT 1", "-"},
		{"/* pgturnstile: priority=9 */ SELECT 1", "-"},
		{"/* pgturnstile: priority=01 */ SELECT 1", "priority=high"},
		{"/* pgturnstile: priority=001 */ SELECT 1", "-"},
		{"/* pgturnstile: category=web/search/x */", "-"},
		{"/* pgturnstile: */ SELECT 1", "-"},
		{"/* pgturnstile: priority */ SELECT 1", "-"},
		{"/* pgturnstile: priority= */ SELECT 1", "-"},
		{"/* pgturnstile: =low */ SELECT 1", "-"},
		{"/* pgturnstile: priority=low, source */ SELECT 1", "-"},
		{"/* pgturnstile: priority=%4 */ SELECT 1", "-"},
		{"/* pgturnstile: priority=%zzlow */ SELECT 1", "-"},
		{"/* other: priority=low */ SELECT 1", "-"},
		{"/* PGTURNSTILE: priority=low */ SELECT 1", "-"},
		{"/* pgturnstile: priority=low */", "priority=low"},
		{"-- pgturnstile: priority=low\nSELECT 1", "-"},
		{"SELECT 1; /* pgturnstile: priority=low */ SELECT 2", "-"},
		// Postgres nests comments: this one does not end at the first */.
		{"/* pgturnstile: priority=low /* x */ */ SELECT 1", "-"},
		{"/*/ pgturnstile: priority=low */ SELECT 1", "-"},

		// trailing, sqlcommenter
		{"SELECT 1 /*priority='low',source='web'*/", "priority=low source=web"},
		{"SELECT 1 /*category='web%2Fsearch',priority='low'*/;  \n", "priority=low source=web endpoint=search"},
		{"SELECT * FROM t /*action='%2Fparam*d',controller='index',framework='spring',priority='medium',traceparent='00-5bd66ef5095369c7b0d1f8f4bd33716a-c532cb4098ac3dd2-01'*/", "priority=medium"},
		{"SELECT 1 /*source='we\\'b'*/", "source=?"},
		{"SELECT 1 /*source='w\\%65b'*/", "source=?"},
		{"SELECT 1 /*source='w%65b'*/", "source=web"},
		{"SELECT 1 /* pgturnstile: priority=low */", "priority=low"},
		{"SELECT 1 /*priority=low*/", "priority=low"},
		{"SELECT 1 /*priority='low' , source='batch'*/", "priority=low source=batch"},
		{"SELECT 1 /*priority='%zz'*/", "-"},
		{"SELECT 1 /*priority='low*/", "-"},
		{"SELECT 1 /*priority='low'x*/", "-"},
		{"SELECT 1 /*priority=''*/", "-"},
		{"SELECT 1 /* hello */", "-"},
		{"SELECT 1 /**/", "-"},
		{"SELECT 1 /*controller='index'*/", "-"},
		{"SELECT 1 /*priority='low'*/;;", "-"},
		{"SELECT 1 /*priority='low'*/ x", "-"},
		{"SELECT 1 /* a /* priority='low' */ b */", "-"},
		{"SELECT 1 /*/", "-"},

		// literals cannot pass for tags
		{"SELECT '/* pgturnstile: priority=low */'", "-"},
		{"INSERT INTO t VALUES ('/*priority=''low''*/')", "-"},
		{"SELECT '/*priority=''low''*/';", "-"},
		{"SELECT $$/*priority='low'*/$$", "-"},
		{"SELECT E'\\'/*priority=''low''*/'", "-"},

		// both: the leading tag wins, unless it gives nothing known
		{"/* pgturnstile: priority=low */ SELECT 1 /*priority='medium',source='web'*/", "priority=low"},
		{"/* pgturnstile: foo=1 */ SELECT 1 /*priority='medium'*/", "priority=medium"},
		{"/* pgturnstile: priority */ SELECT 1 /*priority='medium'*/", "priority=medium"},

		{"", "-"},
		{"/*", "-"},
		{"*/", "-"},
		{"/**/", "-"},
		{";", "-"},
	} {
		tag, ok := p.TagOf([]byte(tc.sql))
		if got := describe(p, tag, ok); got != tc.want {
			t.Errorf("TagOf(%q) = %s, want %s", tc.sql, got, tc.want)
		}
	}
}

// TestTagWindows: a leading tag must end within the first 512 bytes, a
// trailing one must lie within the last 512 bytes.
func TestTagWindows(t *testing.T) {
	p := mustPolicy(t, testPolicy)
	lead := func(n int) string { // a leading tag ending exactly at byte n
		head := "/* pgturnstile: priority=low"
		return head + strings.Repeat(" ", n-len(head)-2) + "*/ SELECT 1"
	}
	trail := func(n int) string { // a trailing tag starting n bytes before the end
		tail := "/*priority='low'" // then spaces, "*/", " ;\n"
		const after = " ;\n"
		return "SELECT 1 " + tail + strings.Repeat(" ", n-len(tail)-2-len(after)) + "*/" + after
	}
	for _, tc := range []struct {
		name, sql, want string
	}{
		{"leading ends at 512", lead(512), "priority=low"},
		{"leading ends at 513", lead(513), "-"},
		{"leading after 480 spaces", strings.Repeat(" ", 480) + "/* pgturnstile: priority=low */ SELECT 1", "priority=low"},
		{"leading after 490 spaces", strings.Repeat(" ", 490) + "/* pgturnstile: priority=low */ SELECT 1", "-"},
		{"trailing starts 512 from the end", trail(512), "priority=low"},
		{"trailing starts 513 from the end", trail(513), "-"},
		{"trailing before 500 spaces", "SELECT 1 /*priority='low'*/" + strings.Repeat(" ", 500), "-"},
		{"trailing before 480 spaces", "SELECT 1 /*priority='low'*/" + strings.Repeat(" ", 480), "priority=low"},
		{"long statement", "/* pgturnstile: priority=low */" + strings.Repeat("x", 1<<20) + "/*source='web'*/", "priority=low"},
		{"long statement, trailing", "SELECT" + strings.Repeat("x", 1<<20) + "/*source='web'*/", "source=web"},
	} {
		if got := describe(mustTag(p, tc.sql)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if n := len(lead(512)) - len(" SELECT 1"); n != 512 {
		t.Fatalf("lead(512) ends at %d", n)
	}
	if s := trail(512); len(s)-strings.LastIndex(s, "/*") != 512 {
		t.Fatalf("trail(512) starts %d from the end", len(s)-strings.LastIndex(s, "/*"))
	}
}

func mustTag(p *Policy, sql string) (*Policy, Tag, bool) {
	t, ok := p.TagOf([]byte(sql))
	return p, t, ok
}

func FuzzTag(f *testing.F) {
	p := mustPolicy(f, testPolicy)
	for _, s := range []string{
		"/* pgturnstile: priority=low, category=web/search */ SELECT 1",
		"SELECT 1 /*category='web%2Fsearch',priority='low'*/;",
		"SELECT 1 /*source='we\\'b'*/",
		"/* pgturnstile: category=source=web/endpoint=comments */",
		"SELECT '/* pgturnstile: priority=low */'",
		"/* pgturnstile: priority=low /* x */ */",
		"/* pgturnstile: priority=" + strings.Repeat("a", 600) + " */",
		"/* pgturnstile: priority=low */" + strings.Repeat("x", 1200) + "/*source='web'*/",
		"",
	} {
		f.Add([]byte(s), []byte("/*source='batch'*/ filler"))
	}
	f.Fuzz(func(t *testing.T, sql, filler []byte) {
		tag, ok := p.TagOf(sql)
		if !ok && tag != (Tag{}) {
			t.Fatalf("no tag but %+v", tag)
		}
		if ok && (tag.gen != p.gen || tag.prio < 0 || int(tag.prio) > p.Tiers() || tag.set >= 1<<len(p.levels)) {
			t.Fatalf("bad tag %+v", tag)
		}
		for l := range p.levels {
			if int(tag.vals[l]) >= len(p.values[l]) {
				t.Fatalf("bad tag %+v", tag)
			}
		}
		s := p.Session("web", "db", "", nil)
		c := p.ClassifyTag(&s, tag, ok)
		if c.Priority < s.MaxPriority() || c.Priority >= p.Tiers() || int(c.Leaf) < 0 || int(c.Leaf) >= p.Tree().Leaves() {
			t.Fatalf("class %+v out of range", c)
		}
		// Bytes past len(sql), even inside its capacity, are not read.
		padded := append(append(make([]byte, 0, len(sql)+64), sql...), "/*priority='low',source='batch'*/"...)
		if t2, ok2 := p.TagOf(padded[:len(sql)]); t2 != tag || ok2 != ok {
			t.Fatalf("spare capacity changed the tag: %s vs %s", describe(p, t2, ok2), describe(p, tag, ok))
		}
		// Bytes between the windows do not matter, however many.
		if len(sql) > 2*window {
			other := bytes.Join([][]byte{sql[:window], filler, sql[len(sql)-window:]}, nil)
			if t2, ok2 := p.TagOf(other); t2 != tag || ok2 != ok {
				t.Fatalf("middle bytes changed the tag: %s vs %s", describe(p, t2, ok2), describe(p, tag, ok))
			}
		}
	})
}

func ExamplePolicy_TagOf() {
	cfg, err := config.ParseAdmission([]byte(testPolicy), "admission.toml")
	if err != nil {
		panic(err)
	}
	p, err := New(cfg)
	if err != nil {
		panic(err)
	}
	for _, sql := range []string{
		"/* pgturnstile: priority=low, category=web/search */ SELECT 1",
		"SELECT 1 /*endpoint='comments',priority='medium',route='%2Fposts'*/",
		"SELECT '/* pgturnstile: priority=low */'",
	} {
		s := p.Session("admin", "db", "", nil)
		c := p.Classify(&s, []byte(sql))
		fmt.Println(p.PriorityName(c.Priority), p.Tree().LeafPath(c.Leaf))
	}
	// Output:
	// low source=web/endpoint=search
	// medium source=other
	// critical source=other
}

package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// renderAdmission prints a policy in a stable text form for golden files.
func renderAdmission(p *AdmissionPolicy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "priorities %s default=%d\n", strings.Join(p.Priorities, ","), p.DefaultPriority)
	fmt.Fprintf(&b, "short=%s long=%s decay=%s shed=%s\n",
		p.ShortTimeout, p.LongTimeout, p.DebtDecayInterval, p.ShedSQLState)
	fmt.Fprintf(&b, "levels %s\n", strings.Join(p.Levels, ","))
	for _, n := range p.Nodes {
		fmt.Fprintf(&b, "node line=%d path=%s weight=%g ceiling=%g\n", n.Line, strings.Join(n.Path, "/"), n.Weight, n.Ceiling)
	}
	for _, r := range p.Rules {
		fmt.Fprintf(&b, "rule line=%d user=%q database=%q application_name=%q priority=%d category=%q\n",
			r.Line, r.User, r.Database, r.ApplicationName, r.Priority, r.Category)
	}
	for _, name := range slices.Sorted(maps.Keys(p.Users)) {
		fmt.Fprintf(&b, "user %q max_priority=%d\n", name, p.Users[name].MaxPriority)
	}
	return b.String()
}

func TestParseAdmissionDefaults(t *testing.T) {
	for _, data := range []string{"", "# nothing\n", "[priorities]\n[tree]\n"} {
		p, err := ParseAdmission([]byte(data), "a.toml")
		if err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		want := &AdmissionPolicy{
			File:              "a.toml",
			Priorities:        []string{"critical", "high", "medium", "low"},
			DefaultPriority:   1,
			ShortTimeout:      5 * time.Millisecond,
			LongTimeout:       100 * time.Millisecond,
			DebtDecayInterval: 10 * time.Second,
			ShedSQLState:      "53000",
			Users:             map[string]AdmissionUser{},
		}
		if !reflect.DeepEqual(p, want) {
			t.Errorf("%q:\n got %+v\nwant %+v", data, p, want)
		}
	}
}

func TestParseAdmissionValues(t *testing.T) {
	p, err := ParseAdmission([]byte(`
[priorities]
names = ["gold", "silver", "bronze"]
default = "bronze"
short_timeout = "20ms"
long_timeout = "20ms"
debt_decay_interval = "1m30s"
debt_forgive_per_success = 0
shed_sqlstate = "53300"

[tree]
levels = ["auth", "endpoint"]
[[tree.node]]
path = "auth=yes"
weight = 3
[[tree.node]]
path = "auth=yes/endpoint=search"
weight = 0.5
ceiling = 1

[[rule]]
user = "u?"
database = "[a-c]*"
application_name = "x*"
priority = "gold"
category = { endpoint = "search" }
[[rule]]
[users."web user"]
max_priority = "silver"
[users.batch]
`), "a.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := &AdmissionPolicy{
		File:              "a.toml",
		Priorities:        []string{"gold", "silver", "bronze"},
		DefaultPriority:   2,
		ShortTimeout:      20 * time.Millisecond,
		LongTimeout:       20 * time.Millisecond,
		DebtDecayInterval: 90 * time.Second,
		ShedSQLState:      "53300",
		Levels:            []string{"auth", "endpoint"},
		Nodes: []AdmissionNode{
			{Line: 13, Path: []string{"yes"}, Weight: 3},
			{Line: 16, Path: []string{"yes", "search"}, Weight: 0.5, Ceiling: 1},
		},
		Rules: []AdmissionRule{
			{Line: 21, User: "u?", Database: "[a-c]*", ApplicationName: "x*", Priority: 0, Category: []string{"", "search"}},
			{Line: 27, Priority: -1},
		},
		Users: map[string]AdmissionUser{
			"web user": {MaxPriority: 1},
			"batch":    {MaxPriority: -1},
		},
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("\n got %+v\nwant %+v", p, want)
	}
	if i, ok := p.PriorityIndex("bronze"); i != 2 || !ok {
		t.Errorf("PriorityIndex(bronze) = %d, %v", i, ok)
	}
	if i, ok := p.PriorityIndex("low"); i != -1 || ok {
		t.Errorf("PriorityIndex(low) = %d, %v", i, ok)
	}
}

// TestParseAdmissionDefaultTier: custom names without a default place
// unplaced sessions in the second tier, or the only one.
func TestParseAdmissionDefaultTier(t *testing.T) {
	for data, want := range map[string]int{
		"[priorities]\nnames = [\"a\"]\n":             0,
		"[priorities]\nnames = [\"a\", \"b\"]\n":      1,
		"[priorities]\nnames = [\"a\", \"b\", \"c\"]": 1,
	} {
		p, err := ParseAdmission([]byte(data), "a.toml")
		if err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		if p.DefaultPriority != want {
			t.Errorf("%q: default %d, want %d", data, p.DefaultPriority, want)
		}
	}
}

func TestParseAdmissionErrors(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
	}{
		// syntax, from the TOML library with its line
		{"syntax", "[priorities]\nnames = [\"a\"\n", `a.toml:2: expected a comma (',') or array terminator (']'), but got end of file`},
		{"duplicate key", "[tree]\nlevels = []\nlevels = []\n", `a.toml:3: Key 'tree.levels' has already been defined.`},

		// unknown keys, named in full, at their line
		{"unknown top", "\n\nfoo = 1\n", `a.toml:3: unknown key "foo"`},
		{"unknown table", "[priorites]\nnames = [\"a\"]\n", `a.toml:1: unknown key "priorites"`},
		{"unknown priorities key", "[priorities]\nnames = [\"a\"]\n\nshort = \"1s\"\n", `a.toml:4: unknown key "priorities.short"`},
		{"case matters", "[priorities]\nNames = [\"a\"]\n", `a.toml:2: unknown key "priorities.Names"`},
		{"unknown in second rule", "[[rule]]\npriority = \"low\"\n[[rule]]\nuser = \"x\"\nprio = \"low\"\n", `a.toml:5: unknown key "rule.prio"`},
		{"unknown node key", "[tree]\nlevels = [\"a\"]\n[[tree.node]]\npath = \"a=b\"\nweigth = 2\n", `a.toml:5: unknown key "tree.node.weigth"`},
		{"unknown user key", "[users.app]\nmax_priority = \"low\"\nmin_priority = \"low\"\n", `a.toml:3: unknown key "users.app.min_priority"`},
		{"unknown quoted user key", "[users.\"a.b\"]\n\"x y\" = 1\n", `a.toml:2: unknown key "users.\"a.b\".\"x y\""`},
		{"dotted under category", "[tree]\nlevels = [\"a\"]\n[[rule]]\ncategory = { a.b = \"x\" }\n", `a.toml:4: unknown key "rule.category.a.b"`},
		{"dotted key", "priorities.nmes = [\"a\"]\n", `a.toml:1: unknown key "priorities.nmes"`},
		{"first in file order", "[[rule]]\nzz = 1\n[priorities]\naa = 1\n", `a.toml:2: unknown key "rule.zz"`},

		// types
		{"priorities not a table", "priorities = 3\n", `a.toml:1: priorities: must be a table, not integer`},
		{"names not array", "[priorities]\nnames = \"a\"\n", `a.toml:2: priorities.names: must be an array of strings, not string`},
		{"names of ints", "[priorities]\nnames = [\n  1,\n  2,\n]\n", `a.toml:2: priorities.names: must be an array of strings, not of integer`},
		{"default int", "[priorities]\ndefault = 1\n", `a.toml:2: priorities.default: must be a string, not integer`},
		{"duration int", "[priorities]\nshort_timeout = 5\n", `a.toml:2: priorities.short_timeout: must be a duration string such as "5ms", not integer`},
		{"forgive string", "[priorities]\ndebt_forgive_per_success = \"0.1\"\n", `a.toml:2: priorities.debt_forgive_per_success: must be a number, not string`},
		{"forgive nan", "[priorities]\ndebt_forgive_per_success = nan\n", `a.toml:2: priorities.debt_forgive_per_success: must be a finite number`},
		{"rule not array", "rule = 1\n", `a.toml:1: rule: must be an array of tables, not integer`},
		{"rule array of ints", "rule = [1]\n", `a.toml:1: rule: must be an array of tables, not integer`},
		{"user not table", "[users]\napp = \"high\"\n", `a.toml:2: users.app: must be a table, not string`},
		{"category not table", "[tree]\nlevels = [\"a\"]\n[[rule]]\ncategory = \"x\"\n", `a.toml:4: rule.category: must be a table, not string`},
		{"pattern not string", "[[rule]]\nuser = [\"a\"]\n", `a.toml:2: rule.user: must be a string, not array`},
		{"weight string", "[tree]\nlevels = [\"a\"]\n[[tree.node]]\npath = \"a=b\"\nweight = \"2\"\n", `a.toml:5: tree.node.weight: must be a number, not string`},
		{"datetime", "[priorities]\ndefault = 2024-01-01\n", `a.toml:2: priorities.default: must be a string, not datetime`},

		// priorities
		{"no names", "[priorities]\nnames = []\n", `a.toml:2: priorities.names: must hold 1 to 8 names, not 0`},
		{"nine names", "[priorities]\nnames = [\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"]\n", `a.toml:2: priorities.names: must hold 1 to 8 names, not 9`},
		{"duplicate name", "[priorities]\nnames = [\"a\", \"b\", \"a\"]\n", `a.toml:2: priorities.names: duplicate name "a"`},
		{"numeric name", "[priorities]\nnames = [\"1\"]\n", `a.toml:2: priorities.names: invalid name "1" (a letter, then letters, digits, '_' or '-'; at most 32 bytes)`},
		{"name with space", "[priorities]\nnames = [\"a b\"]\n", `a.toml:2: priorities.names: invalid name "a b" (a letter, then letters, digits, '_' or '-'; at most 32 bytes)`},
		{"default not a name", "[priorities]\nnames = [\"a\", \"b\"]\n\ndefault = \"high\"\n", `a.toml:4: priorities.default: unknown priority "high" (priorities.names: a, b)`},
		{"bad duration", "[priorities]\nlong_timeout = \"5\"\n", `a.toml:2: priorities.long_timeout: invalid duration "5" (examples: "5ms", "1.5s")`},
		{"zero duration", "[priorities]\ndebt_decay_interval = \"0s\"\n", `a.toml:2: priorities.debt_decay_interval: must be positive, not 0s`},
		{"negative duration", "[priorities]\nshort_timeout = \"-1ms\"\n", `a.toml:2: priorities.short_timeout: must be positive, not -1ms`},
		{"short over long", "[priorities]\nshort_timeout = \"200ms\"\n", `a.toml:2: priorities.short_timeout: 200ms is longer than long_timeout (100ms)`},
		{"long under short", "[priorities]\n\nlong_timeout = \"1ms\"\n", `a.toml:3: priorities.long_timeout: 1ms is shorter than short_timeout (5ms)`},
		{"both set", "[priorities]\nlong_timeout = \"1s\"\nshort_timeout = \"2s\"\n", `a.toml:3: priorities.short_timeout: 2s is longer than long_timeout (1s)`},
		{"forgive over 1", "[priorities]\ndebt_forgive_per_success = 1.5\n", `a.toml:2: priorities.debt_forgive_per_success: must be between 0 and 1, not 1.5`},
		{"forgive negative", "[priorities]\ndebt_forgive_per_success = -1\n", `a.toml:2: priorities.debt_forgive_per_success: must be between 0 and 1, not -1`},
		{"sqlstate", "[priorities]\nshed_sqlstate = \"57P03\"\n", `a.toml:2: priorities.shed_sqlstate: must be "53000" or "53300", not "57P03"`},

		// tree
		{"five levels", "[tree]\nlevels = [\"a\",\"b\",\"c\",\"d\",\"e\"]\n", `a.toml:2: tree.levels: must hold at most 4 levels, not 5`},
		{"duplicate level", "[tree]\nlevels = [\"a\",\"a\"]\n", `a.toml:2: tree.levels: duplicate level "a"`},
		{"uppercase level", "[tree]\nlevels = [\"Auth\"]\n", `a.toml:2: tree.levels: invalid level "Auth" (a lowercase letter, then lowercase letters, digits or '_'; at most 32 bytes; not "priority" or "category")`},
		{"reserved level", "[tree]\nlevels = [\"priority\"]\n", `a.toml:2: tree.levels: invalid level "priority" (a lowercase letter, then lowercase letters, digits or '_'; at most 32 bytes; not "priority" or "category")`},
		{"nodes without levels", "[tree]\n[[tree.node]]\npath = \"a=b\"\n", `a.toml:2: tree.node: nodes need tree.levels`},
		{"missing path", "[tree]\nlevels = [\"a\"]\n[[tree.node]]\npath = \"a=b\"\n[[tree.node]]\nweight = 2\n", `a.toml:5: tree.node: missing path`},
		{"path not pair", "[tree]\nlevels = [\"a\"]\n[[tree.node]]\npath = \"b\"\n", `a.toml:4: tree.node.path: "b": segment "b" is not "level=value"`},
		{"path wrong level", "[tree]\nlevels = [\"a\", \"b\"]\n[[tree.node]]\npath = \"b=x\"\n", `a.toml:4: tree.node.path: "b=x": level "b" where tree.levels has "a"`},
		{"path out of order", "[tree]\nlevels = [\"a\", \"b\"]\n[[tree.node]]\npath = \"a=x/a=y\"\n", `a.toml:4: tree.node.path: "a=x/a=y": level "a" where tree.levels has "b"`},
		{"path too deep", "[tree]\nlevels = [\"a\"]\n[[tree.node]]\npath = \"a=x/b=y\"\n", `a.toml:4: tree.node.path: "a=x/b=y" is deeper than tree.levels (1)`},
		{"path bad value", "[tree]\nlevels = [\"a\"]\n[[tree.node]]\npath = \"a=x y\"\n", `a.toml:4: tree.node.path: "a=x y": invalid value "x y" (1 to 64 letters, digits, '_', '-', '.' or ':')`},
		{"path empty value", "[tree]\nlevels = [\"a\"]\n[[tree.node]]\npath = \"a=\"\n", `a.toml:4: tree.node.path: "a=": invalid value "" (1 to 64 letters, digits, '_', '-', '.' or ':')`},
		{"duplicate node", "[tree]\nlevels = [\"a\"]\n[[tree.node]]\npath = \"a=x\"\n[[tree.node]]\npath = \"a=x\"\n", `a.toml:6: tree.node.path: duplicate node "a=x" (first at line 3)`},
		{"zero weight", "[tree]\nlevels = [\"a\"]\n[[tree.node]]\npath = \"a=x\"\nweight = 0\n", `a.toml:5: tree.node.weight: must be positive, not 0`},
		{"zero ceiling", "[tree]\nlevels = [\"a\"]\n[[tree.node]]\npath = \"a=x\"\nceiling = 0.0\n", `a.toml:5: tree.node.ceiling: must be in (0, 1], not 0`},
		{"big ceiling", "[tree]\nlevels = [\"a\"]\n[[tree.node]]\npath = \"a=x\"\nceiling = 1.01\n", `a.toml:5: tree.node.ceiling: must be in (0, 1], not 1.01`},
		{"inline node", "[tree]\nlevels = [\"a\"]\nnode = [\n  { path = \"a=x\" },\n  { path = \"a=x\" },\n]\n", `a.toml:3: tree.node.path: duplicate node "a=x" (first at line 3)`},

		// rules
		{"rule unknown priority", "[[rule]]\npriority = \"low\"\n[[rule]]\npriority = \"lowest\"\n", `a.toml:4: rule.priority: unknown priority "lowest" (priorities.names: critical, high, medium, low)`},
		{"rule priority order", "[[rule]]\npriority = \"a\"\n[priorities]\nnames = [\"a\"]\n", ""},
		{"rule unknown level", "[tree]\nlevels = [\"a\"]\n[[rule]]\ncategory = { b = \"x\" }\n", `a.toml:4: rule.category.b: unknown level "b" (tree.levels: a)`},
		{"rule without levels", "[[rule]]\ncategory = { source = \"x\" }\n", `a.toml:2: rule.category.source: unknown level "source" (no tree.levels)`},
		{"rule level as table", "[tree]\nlevels = [\"a\"]\n[[rule]]\n[rule.category]\nb = \"x\"\n", `a.toml:5: rule.category.b: unknown level "b" (tree.levels: a)`},
		{"rule bad value", "[tree]\nlevels = [\"a\"]\n[[rule]]\ncategory = { a = \"x/y\" }\n", `a.toml:4: rule.category.a: invalid value "x/y" (1 to 64 letters, digits, '_', '-', '.' or ':')`},
		{"rule value type", "[tree]\nlevels = [\"a\"]\n[[rule]]\n[rule.category]\na = 1\n", `a.toml:5: rule.category.a: must be a string, not integer`},
		{"rule bad glob", "[[rule]]\napplication_name = \"a[\"\n", `a.toml:2: rule.application_name: invalid pattern "a["`},
		{"rule bad glob after star", "[[rule]]\ndatabase = \"*\\\\\"\n", `a.toml:2: rule.database: invalid pattern "*\\"`},
		{"rule empty glob", "[[rule]]\nuser = \"\"\n", `a.toml:2: rule.user: invalid pattern ""`},

		// users
		{"user unknown priority", "[users.app]\nmax_priority = \"top\"\n", `a.toml:2: users.app.max_priority: unknown priority "top" (priorities.names: critical, high, medium, low)`},
		{"quoted user", "[users]\n\"a b\" = { max_priority = 3 }\n", `a.toml:2: users."a b".max_priority: must be a string, not integer`},

		// the scanner follows values over lines and through strings
		{"multi-line string", "[priorities]\nshed_sqlstate = \"\"\"\n[users.x]\nmax_priority = 1\n\"\"\"\n", `a.toml:2: priorities.shed_sqlstate: must be "53000" or "53300", not "[users.x]\nmax_priority = 1\n"`},
		{"literal multi-line", "[priorities]\nnames = ['''a\n''']\ndefault = 1\n", `a.toml:2: priorities.names: invalid name "a\n" (a letter, then letters, digits, '_' or '-'; at most 32 bytes)`},
		{"array with comments", "[priorities]\nnames = [ # ]\n  \"a\", # [\n  \"b\",\n]\ndefault = 1\n", `a.toml:6: priorities.default: must be a string, not integer`},
		{"nested arrays", "[priorities]\nnames = [\n[\"a\"],\n]\n", `a.toml:2: priorities.names: must be an array of strings, not of array`},
		{"crlf", "[priorities]\r\n\r\nnames = [\"a\", \"a\"]\r\n", `a.toml:3: priorities.names: duplicate name "a"`},
		{"tab and quotes", "[ \"priorities\" ]\n\t'default' = 0\n", `a.toml:2: priorities.default: must be a string, not integer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseAdmission([]byte(tc.data), "a.toml")
			got := ""
			if err != nil {
				got = err.Error()
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Errorf("error %T is not a *ParseError", err)
				}
			}
			if got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestLoadAdmission(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadAdmission(filepath.Join(dir, "missing.toml")); err == nil ||
		!strings.HasPrefix(err.Error(), "cannot load admission file: open ") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := LoadAdmission(dir); err == nil || err.Error() != "cannot load admission file: "+dir+": not a regular file" {
		t.Errorf("directory: %v", err)
	}
	name := filepath.Join(dir, "a.toml")
	if err := os.WriteFile(name, []byte("[priorities]\nshed_sqlstate = \"x\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadAdmission(name); err == nil || err.Error() != name+`:2: priorities.shed_sqlstate: must be "53000" or "53300", not "x"` {
		t.Errorf("bad file: %v", err)
	}
}

// TestAdmissionGolden parses every testdata/admission/*.toml and compares
// the result (or the error) with the .golden file next to it.
func TestAdmissionGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "admission", "*.toml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			var got string
			p, err := LoadAdmission(f)
			if err != nil {
				got = "error: " + err.Error() + "\n"
			} else {
				got = renderAdmission(p)
			}
			golden := strings.TrimSuffix(f, ".toml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("differs from %s (rerun with -update after checking):\n%s", golden, got)
			}
		})
	}
}

// TestAdmissionExample keeps etc/admission.example.toml loadable and says
// what it declares.
func TestAdmissionExample(t *testing.T) {
	p, err := LoadAdmission(filepath.Join("..", "etc", "admission.example.toml"))
	if err != nil {
		t.Fatal(err)
	}
	got := renderAdmission(p)
	want := `priorities critical,high,medium,low default=1
short=5ms long=100ms decay=10s shed=53000
levels source,endpoint
node line=50 path=web weight=3 ceiling=0
node line=54 path=web/comments weight=1 ceiling=0
node line=58 path=web/search weight=1 ceiling=0.5
node line=63 path=batch weight=1 ceiling=0.3
rule line=72 user="" database="" application_name="batch-*" priority=3 category=["batch" ""]
rule line=77 user="web" database="" application_name="search-*" priority=-1 category=["web" "search"]
rule line=82 user="web" database="" application_name="" priority=-1 category=["web" ""]
user "ops" max_priority=0
user "web" max_priority=1
`
	if got != want {
		t.Errorf("\n got:\n%s\nwant:\n%s", got, want)
	}
}

func FuzzParseAdmission(f *testing.F) {
	seeds := []string{
		"",
		"[priorities]\nnames = [\"a\", \"b\"]\ndefault = \"b\"\nshort_timeout = \"1ms\"\nlong_timeout = \"2ms\"\n",
		"[tree]\nlevels = [\"a\", \"b\"]\n[[tree.node]]\npath = \"a=x/b=y\"\nweight = 2\nceiling = 0.5\n",
		"[[rule]]\nuser = \"u*\"\npriority = \"low\"\n[[rule]]\ncategory = { a = \"x\" }\n",
		"[users.\"a b\"]\nmax_priority = \"high\"\n",
		"x = \"\"\"\n[[a]]\n\"\"\"\ny = [\n{z = 1},\n]\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	if data, err := os.ReadFile(filepath.Join("..", "etc", "admission.example.toml")); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseAdmission(data, "f.toml")
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *ParseError: %v", err, err)
			}
			if pe.Line < 0 || pe.Line > strings.Count(string(data), "\n")+1 {
				t.Fatalf("line %d outside the file: %v", pe.Line, err)
			}
			return
		}
		// Whatever parses must satisfy what the classifier relies on.
		if n := len(p.Priorities); n < 1 || n > MaxAdmissionPriorities || p.DefaultPriority < 0 || p.DefaultPriority >= n {
			t.Fatalf("priorities %q default %d", p.Priorities, p.DefaultPriority)
		}
		if p.ShortTimeout <= 0 || p.ShortTimeout > p.LongTimeout || p.DebtDecayInterval <= 0 {
			t.Fatalf("timeouts %s %s %s", p.ShortTimeout, p.LongTimeout, p.DebtDecayInterval)
		}
		if len(p.Levels) > MaxAdmissionLevels {
			t.Fatalf("levels %q", p.Levels)
		}
		for _, n := range p.Nodes {
			if len(n.Path) == 0 || len(n.Path) > len(p.Levels) || !(n.Weight > 0) || n.Ceiling < 0 || n.Ceiling > 1 {
				t.Fatalf("node %+v", n)
			}
			for _, v := range n.Path {
				if !validAdmissionValue(v) {
					t.Fatalf("node %+v", n)
				}
			}
		}
		for _, r := range p.Rules {
			if r.Priority < -1 || r.Priority >= len(p.Priorities) || (r.Category != nil && len(r.Category) != len(p.Levels)) {
				t.Fatalf("rule %+v", r)
			}
		}
		for name, u := range p.Users {
			if u.MaxPriority < -1 || u.MaxPriority >= len(p.Priorities) {
				t.Fatalf("user %q %+v", name, u)
			}
		}
	})
}

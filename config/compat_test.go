package config

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite generated files (pgbouncer-compat.md tables)")

const compatPath = "../pgbouncer-compat.md"

// A generated block sits between these two lines in pgbouncer-compat.md.
func beginMarker(name string) string {
	return "<!-- BEGIN GENERATED " + name + ": go test ./config -run TestCompatDoc -update -->"
}
func endMarker(name string) string { return "<!-- END GENERATED " + name + " -->" }

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func mdDefault(k Key) string {
	if k.Default == "" {
		return "(empty)"
	}
	return "`" + k.Default + "`"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no (restart)"
}

// generated returns the text of each generated block, from the tables.
func generated() map[string]string {
	var b strings.Builder
	b.WriteString("| setting | default | reload | status | meaning | how / why |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, k := range Keys {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n",
			k.Name, mdCell(mdDefault(k)), yesNo(k.Reloadable), k.Status, mdCell(k.Doc), mdCell(k.Note))
	}
	out := map[string]string{"settings": b.String()}
	for name, ps := range map[string][]param{"databases": dbKeys.docs(), "users": userKeys.docs()} {
		var b strings.Builder
		b.WriteString("| key | kind | status | meaning | how / why |\n")
		b.WriteString("|---|---|---|---|---|\n")
		for _, p := range ps {
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", p.Name, p.Kind, p.Status, mdCell(p.Doc), mdCell(p.Note))
		}
		out[name] = b.String()
	}
	return out
}

// block returns the text between the markers of a generated block.
func block(doc, name string) (start, end int, ok bool) {
	b := strings.Index(doc, beginMarker(name))
	e := strings.Index(doc, endMarker(name))
	if b < 0 || e < b {
		return 0, 0, false
	}
	start = b + len(beginMarker(name)) + 1 // past the newline
	return start, e, start <= e
}

// splitRow splits a markdown table row on unescaped '|'.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		if line[i] == '\\' && i+1 < len(line) && line[i+1] == '|' {
			cur.WriteByte('|')
			i++
			continue
		}
		if line[i] == '|' {
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteByte(line[i])
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// tableStatus parses rows "| `name` | ... |" of a block: name -> cell at statusCol.
func tableStatus(text string, statusCol int) (map[string]string, []string) {
	rows := map[string]string{}
	var problems []string
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := splitRow(line)
		name := strings.Trim(cells[0], "`")
		if len(cells) <= statusCol {
			problems = append(problems, fmt.Sprintf("row %q has too few columns", name))
			continue
		}
		if _, dup := rows[name]; dup {
			problems = append(problems, fmt.Sprintf("%s is listed twice", name))
		}
		rows[name] = cells[statusCol]
	}
	return rows, problems
}

// checkCompat compares pgbouncer-compat.md with the tables and returns
// every difference.
func checkCompat(doc string) []string {
	var problems []string
	gen := generated()
	type table struct {
		block     string
		statusCol int
		want      map[string]string
	}
	want := func(names []string, statuses []Status) map[string]string {
		m := map[string]string{}
		for i, n := range names {
			m[n] = statuses[i].String()
		}
		return m
	}
	var kn []string
	var ks []Status
	for _, k := range Keys {
		kn, ks = append(kn, k.Name), append(ks, k.Status)
	}
	paramsWant := func(ps []param) map[string]string {
		var n []string
		var s []Status
		for _, p := range ps {
			n, s = append(n, p.Name), append(s, p.Status)
		}
		return want(n, s)
	}
	tables := []table{
		{"settings", 3, want(kn, ks)},
		{"databases", 2, paramsWant(dbKeys.docs())},
		{"users", 2, paramsWant(userKeys.docs())},
	}
	for _, t := range tables {
		start, end, ok := block(doc, t.block)
		if !ok {
			problems = append(problems, fmt.Sprintf("block %q: markers missing", t.block))
			continue
		}
		got, probs := tableStatus(doc[start:end], t.statusCol)
		for _, p := range probs {
			problems = append(problems, t.block+": "+p)
		}
		var names []string
		for n := range t.want {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			st, ok := got[n]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("%s: %s is missing from the doc", t.block, n))
			case st != t.want[n]:
				problems = append(problems, fmt.Sprintf("%s: %s has status %q in the doc, %q in the table", t.block, n, st, t.want[n]))
			}
		}
		for n := range got {
			if _, ok := t.want[n]; !ok {
				problems = append(problems, fmt.Sprintf("%s: the doc lists %s, which is not in the table", t.block, n))
			}
		}
		if len(problems) == 0 && doc[start:end] != gen[t.block] {
			problems = append(problems, fmt.Sprintf("%s: defaults or notes differ from the table", t.block))
		}
	}
	return problems
}

func rewrite(doc string) (string, error) {
	for name, text := range generated() {
		start, end, ok := block(doc, name)
		if !ok {
			return "", fmt.Errorf("block %q: markers missing", name)
		}
		doc = doc[:start] + text + doc[end:]
	}
	return doc, nil
}

// TestCompatDoc keeps pgbouncer-compat.md's tables equal to Keys,
// dbKeys and userKeys. Run with -update to regenerate them.
func TestCompatDoc(t *testing.T) {
	data, err := os.ReadFile(compatPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	if *update {
		doc, err = rewrite(doc)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(compatPath, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range checkCompat(doc) {
		t.Error(p)
	}
	if t.Failed() {
		t.Log("regenerate with: go test ./config -run TestCompatDoc -update")
	}
}

// TestCompatDocDetectsDrift proves the check fails on a missing key, a
// wrong status and an unknown key.
func TestCompatDocDetectsDrift(t *testing.T) {
	data, err := os.ReadFile(compatPath)
	if err != nil {
		t.Fatal(err)
	}
	good, err := rewrite(string(data))
	if err != nil {
		t.Fatal(err)
	}
	if p := checkCompat(good); len(p) != 0 {
		t.Fatalf("freshly generated doc has problems: %v", p)
	}
	listenRow := "| `listen_port` | `6432` | no (restart) | supported |"
	if !strings.Contains(good, listenRow) {
		t.Fatalf("generated doc lacks row prefix %q", listenRow)
	}
	cases := []struct {
		name, doc, want string
	}{
		{"missing", removeLine(good, "| `so_reuseport` |"), "settings: so_reuseport is missing from the doc"},
		{"status", strings.Replace(good, listenRow, "| `listen_port` | `6432` | no (restart) | partial |", 1),
			`settings: listen_port has status "partial" in the doc, "supported" in the table`},
		{"unknown", strings.Replace(good, listenRow, "| `no_such_setting` | `1` | yes | supported | x | |\n"+listenRow, 1),
			"settings: the doc lists no_such_setting, which is not in the table"},
		{"db missing", removeLine(good, "| `load_balance_hosts` |"), "databases: load_balance_hosts is missing from the doc"},
		{"default drift", strings.Replace(good, "| `listen_port` | `6432` |", "| `listen_port` | `5432` |", 1),
			"settings: defaults or notes differ from the table"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := checkCompat(c.doc)
			if !slices.Contains(got, c.want) {
				t.Errorf("problems = %q, want one to be %q", got, c.want)
			}
		})
	}
}

func removeLine(doc, prefix string) string {
	var out []string
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

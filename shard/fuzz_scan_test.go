package shard

import (
	"bytes"
	"testing"
)

// scanSeeds start the fuzzer where the scanner's hard cases are.
var scanSeeds = []string{
	`SELECT * FROM files WHERE org_id = 42`,
	`SELECT * FROM files f JOIN comments c USING (org_id) WHERE org_id IN (1, $2)`,
	`INSERT INTO files (org_id, name) VALUES (7, 'a'), ($1, E'\x41') ON CONFLICT DO NOTHING`,
	`UPDATE files SET (a, org_id) = (1, 2) WHERE org_id = 1`,
	`SELECT $a$ $$ $b$ $a$, "x""y", U&"d\0061t\+000061" FROM docs WHERE slug = 'it''s'`,
	`/* /* */ org_id = 1 */ SELECT 1 -- org_id = 2`,
	"SELECT * FROM files WHERE org_id = '1'\n'2'",
	`DELETE FROM files WHERE x BETWEEN 1 AND 2 AND org_id = -5`,
	`SELECT * FROM files WHERE org_id = ('-5'::int8) AND name = ('a''b')`,
	`INSERT INTO docs (slug, body) VALUES (('x'::varchar), ('y')) RETURNING (1)`,
	`SELECT * FROM sessions WHERE sid IN (('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid), ((1)))`,
}

// FuzzScan: the scanner never panics, its tokens are the lexer's, and a
// key hidden in a string, a comment or a dollar quote never routes a
// statement that has none.
func FuzzScan(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	s := &Scanner{Tables: tables}
	off := &Scanner{Tables: tables, EscapeStrings: true}
	f.Fuzz(func(t *testing.T, data []byte) {
		s.Scan(data)
		off.Scan(data)
		// The scanner's own loop reads the tokens the lexer reads.
		checkTokens(t, s, data)
		checkTokens(t, off, data)

		// The input inside a string: the statement has no key.
		quoted := append([]byte(`SELECT * FROM files WHERE name = '`), bytes.ReplaceAll(data, []byte("'"), []byte("''"))...)
		quoted = append(quoted, '\'')
		if r := s.Scan(quoted); r.Outcome == Keyed {
			t.Fatalf("routed by a string's text: %q", quoted)
		}
		// Inside a dollar quote that the input cannot close.
		if !bytes.Contains(data, []byte("$q$")) {
			dq := append([]byte(`SELECT $q$`), data...)
			dq = append(dq, []byte(`$q$ FROM files WHERE name = 1`)...)
			if r := s.Scan(dq); r.Outcome == Keyed {
				t.Fatalf("routed by a dollar quote's text: %q", dq)
			}
		}
		// Inside a comment the input cannot end or nest.
		if !bytes.Contains(data, []byte("*/")) && !bytes.Contains(data, []byte("/*")) {
			c := append([]byte(`SELECT * FROM files /* `), data...)
			c = append(c, []byte(` */ WHERE name = 1`)...)
			if r := s.Scan(c); r.Outcome == Keyed {
				t.Fatalf("routed by a comment's text: %q", c)
			}
		}
		// Inside a line comment the input cannot end.
		if !bytes.ContainsAny(data, "\r\n") {
			c := append([]byte("SELECT * FROM files WHERE name = 1 --"), data...)
			if r := s.Scan(c); r.Outcome == Keyed {
				t.Fatalf("routed by a line comment's text: %q", c)
			}
		}
	})
}

// FuzzReadHint: hints and router SETs never panic, and what they return
// lies within the statement.
func FuzzReadHint(f *testing.F) {
	for _, s := range []string{
		`/* pgturnstile: shard_key=42, colo=org */ SELECT 1`,
		`SELECT 1 /*shard_key='42',route='%2F'*/;`,
		`SET LOCAL pgturnstile.shard_key TO '42'`,
		`RESET pgturnstile.shard`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, _ := ReadHint(data)
		for _, v := range [][]byte{h.Key, h.Colo, h.Shard} {
			if v != nil && !bytes.Contains(data, v) {
				t.Fatalf("hint value %q not in %q", v, data)
			}
		}
		sh, _, _ := ReadSet(data)
		if sh.Value != nil && !bytes.Contains(data, sh.Value) {
			t.Fatalf("set value %q not in %q", sh.Value, data)
		}
	})
}

// FuzzRoute: routing never panics, and the trailing hint the scan finds
// is the one ReadHint finds lexing the text on its own.
func FuzzRoute(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`SELECT * FROM files /*shard_key='7',colo='org'*/;`))
	f.Add([]byte(`/* pgturnstile: shard_key=7 */ SELECT * FROM files WHERE org_id = $1`))
	c := exampleCluster(f, nil)
	r := NewRouter(c)
	f.Fuzz(func(t *testing.T, data []byte) {
		r.Route(data, Pin{}, true)
		if _, p := r.Prepare(data, Pin{Key: []byte("5"), Colo: "org"}, false); p != nil {
			_, _ = p.Bind(params{{[]byte("1"), false}, {[]byte{0, 1}, true}, {nil, false}})
		}
		if _, leading, _ := leadingHint(data); leading {
			return
		}
		sc := &Scanner{Tables: c}
		sc.Scan(data)
		want, _ := ReadHint(data)
		if sc.res.Reason == ReasonTooLong || sc.trailing == nil && want.Empty() {
			return
		}
		got := trailingHint(sc.trailing)
		if string(got.Key) != string(want.Key) || string(got.Shard) != string(want.Shard) || string(got.Colo) != string(want.Colo) {
			t.Fatalf("%q: scan's trailing hint %+v, ReadHint's %+v", data, got, want)
		}
	})
}

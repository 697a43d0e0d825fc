package shard

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzTextKeys checks the text-form key decoders against references built
// on the standard library: the integers against strconv (whose base-prefix
// and underscore rules are Postgres 16's, once a leading 0 is kept from
// meaning octal), the uuid against a regular expression of uuid_in's
// grammar and encoding/hex. No input may panic, and a key that decodes
// must hash the same in its text and binary forms. The seed corpus is
// testdata/fuzz/FuzzTextKeys.
func FuzzTextKeys(f *testing.F) {
	for _, s := range []string{"42", " -17 ", "0x1F", "1_000", "-9223372036854775808",
		"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "{A0EEBC999C0B4EF8BB6D6BB9BD380A11}", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)

		v, err := ParseInt64(b)
		want, wantOK := refParseInt64(s)
		if (err == nil) != wantOK || err == nil && v != want {
			t.Fatalf("ParseInt64(%q) = %d, %v; reference %d, ok=%v", s, v, err, want, wantOK)
		}
		for _, kt := range []KeyType{KeyBigint, KeyInt, KeySmallint} {
			h, err := kt.HashText(b)
			if err != nil {
				continue
			}
			if !wantOK {
				t.Fatalf("%s accepted %q", kt, s)
			}
			var bin [8]byte
			binary.BigEndian.PutUint64(bin[:], uint64(want))
			if hb, _ := kt.HashBinary(bin[:]); hb != h {
				t.Fatalf("%s %q: text and binary forms place apart", kt, s)
			}
		}

		var u [16]byte
		err = ParseUUID(b, &u)
		wantU, wantOK := refParseUUID(s)
		if (err == nil) != wantOK || err == nil && u != wantU {
			t.Fatalf("ParseUUID(%q) = %x, %v; reference %x, ok=%v", s, u, err, wantU, wantOK)
		}
		if h, err := KeyUUID.HashText(b); err == nil {
			if hb, _ := KeyUUID.HashBinary(u[:]); hb != h {
				t.Fatalf("uuid %q: text and binary forms place apart", s)
			}
		}

		if h, err := KeyText.HashText(b); err != nil || h != HashBytes(b) {
			t.Fatalf("text %q: %v", s, err)
		}
	})
}

// cSpace is what C's isspace takes for a blank in the C locale.
const cSpace = " \t\n\v\f\r"

var decimalDigits = regexp.MustCompile(`^[0-9]+(_[0-9]+)*$`)

// refParseInt64 is int8in's grammar on strconv: blanks around, a sign,
// then digits with single '_' between them, or a 0x/0o/0b prefix, which
// strconv's base 0 reads with the same underscore rule.
func refParseInt64(s string) (int64, bool) {
	s = strings.Trim(s, cSpace)
	body := s
	if body != "" && (body[0] == '+' || body[0] == '-') {
		body = body[1:]
	}
	lower := strings.ToLower(body)
	if strings.HasPrefix(lower, "0x") || strings.HasPrefix(lower, "0o") || strings.HasPrefix(lower, "0b") {
		v, err := strconv.ParseInt(s, 0, 64)
		return v, err == nil
	}
	if !decimalDigits.MatchString(body) {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		panic("reference: " + err.Error())
	}
	return v, err == nil
}

var uuidForm = regexp.MustCompile(`^[0-9a-fA-F]{4}(-?[0-9a-fA-F]{4}){7}$`)

// refParseUUID is uuid_in's grammar as a regular expression: 32 hex
// digits, a '-' allowed after each group of four but the last, the whole
// optionally in braces.
func refParseUUID(s string) ([16]byte, bool) {
	var u [16]byte
	if strings.HasPrefix(s, "{") {
		if !strings.HasSuffix(s, "}") || len(s) < 2 {
			return u, false
		}
		s = s[1 : len(s)-1]
	}
	if !uuidForm.MatchString(s) {
		return u, false
	}
	if _, err := hex.Decode(u[:], []byte(strings.ReplaceAll(s, "-", ""))); err != nil {
		panic("reference: " + err.Error())
	}
	return u, true
}

// FuzzShardFile: no shard file makes Parse panic, every error is a
// *FileError, and a map that parses routes every logical shard of every
// colo to one of the databases it was given.
func FuzzShardFile(f *testing.F) {
	example, err := os.ReadFile("testdata/shards.toml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte("[[cluster]]\nname = \"app\"\ndefault_database = \"main\"\nlogical_shards = 8\n" +
		"[[cluster.colo]]\nname = \"org\"\nkey_type = \"int\"\ntables = { t = \"k\" }\n" +
		"shards = [\n  { range = \"0-3\", database = \"s0\" },\n  { range = \"4-7\", database = \"s1\" },\n]\n"))
	f.Add([]byte("cluster = [{ name = \"x\", colo = [{ shards = [{ range = \"5\" }] }] }]\n"))
	dbs := []string{"main", "s0", "s1", "app_main", "app_s0", "app_s1"}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data, "f.toml", dbs)
		if err != nil {
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T: %v", err, err)
			}
			return
		}
		for _, c := range m.Clusters() {
			if m.Cluster(c.Name) != c {
				t.Fatalf("cluster %q not found by name", c.Name)
			}
			for _, co := range c.Colos() {
				for l := uint32(0); l < c.LogicalShards; l++ {
					if db := co.Database(l); !slices.Contains(dbs, db) {
						t.Fatalf("colo %s: logical shard %d on %q", co.Name, l, db)
					}
				}
			}
		}
	})
}

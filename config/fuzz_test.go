package config

import (
	"os"
	"path/filepath"
	"testing"
)

func FuzzParse(f *testing.F) {
	seeds := []string{
		"",
		"[pgbouncer]\nlisten_port = 6432\npool_mode = transaction\n",
		"[databases]\nfoo = host=x password='a b''c' pool_size=3\n\"q\"\"d\" = dbname=x\n* = host=y\n",
		"[users]\nu = pool_mode=session max_user_connections=3 query_wait_timeout=-1\n",
		"[pools]\n\"a.b\".'c' = pool_size=0x10\n",
		"[peers]\n1 = host=/tmp\n",
		"[pgbouncer]\n%include x.ini\n",
		"[pgbouncer]\nserver_lifetime = 1.5e3\nquery_timeout = 100ms\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	if data, err := os.ReadFile(filepath.Join("..", "testdata", "config", "pgbouncer.ini")); err == nil {
		f.Add(data)
	}
	// Includes resolve against a fixed in-memory tree, including a loop.
	files := memFS{
		"x.ini": "listen_port = 1\n%include y.ini\n",
		"y.ini": "[databases]\nz = host=z\n%include x.ini\n",
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parse("pgbouncer.ini", data, files.read)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("error %T is not a *ParseError: %v", err, err)
			}
			return
		}
		// Whatever parsed must be usable.
		for _, k := range Keys {
			if _, ok := c.Value(k.Name); !ok {
				t.Fatalf("Value(%s) missing", k.Name)
			}
		}
		for _, d := range c.Databases {
			_ = c.Resolve(d, "u")
			if d.Port < 1 || d.Port > 65535 {
				t.Fatalf("bad port %d", d.Port)
			}
		}
		_, _ = c.LookupDatabase("some_db")
		_ = c.Clone()
	})
}

func FuzzParseUserlist(f *testing.F) {
	for _, s := range []string{
		"",
		`"a" "b"`,
		"; c\n\"a\"\"b\" \"md5abc\" rest\n",
		`"u" "SCRAM-SHA-256$4096:c2FsdA==$a2V5:a2V5"`,
		`"x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		users, err := ParseUserlist("userlist.txt", data)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("error %T is not a *ParseError", err)
			}
			return
		}
		for u, s := range users {
			if u == "" || len(u) > maxUserName || len(s) > maxSecret {
				t.Fatalf("limits not enforced: %q", u)
			}
		}
	})
}

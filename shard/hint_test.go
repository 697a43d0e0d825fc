package shard

import (
	"errors"
	"testing"
)

func TestReadHint(t *testing.T) {
	cases := []struct {
		sql              string
		key, colo, shard string
		err              bool
	}{
		{sql: `/* pgturnstile: shard_key=42, colo=org */ SELECT 1`, key: "42", colo: "org"},
		{sql: `  /*pgturnstile: shard_key='a b'*/SELECT 1`, key: "a b"},
		{sql: `/* pgturnstile: shard=app_s1 */ DELETE FROM t`, shard: "app_s1"},
		{sql: `/* pgturnstile: shard=all */ CREATE INDEX i ON t (a)`, shard: "all"},
		{sql: `SELECT * FROM t WHERE a = 1 /*shard_key='42',route='%2Fapi'*/;`, key: "42"},
		{sql: `SELECT * FROM t /*colo='org',shard_key='7'*/ `, key: "7", colo: "org"},
		{sql: `/* pgturnstile: priority=low */ SELECT 1`, err: true},
		{sql: `/* pgturnstile: shard_key= */ SELECT 1`, key: ""},
		{sql: `/* pgturnstile: shard_key='unclosed */ SELECT 1`, err: true},
		{sql: `/* pgturnstile: shard_key='it''s' */ SELECT 1`, err: true},
		{sql: `/* pgturnstile: */ SELECT 1`, err: true},
		{sql: `SELECT 1`},
		{sql: `SELECT '/*shard_key=1*/'`},
		{sql: `SELECT 1 /* a /* nested */ shard_key=1 */`},
		{sql: `/* other tool */ SELECT 1`},
		{sql: `SELECT $$ /*shard_key=1*/`},
	}
	for _, c := range cases {
		h, err := ReadHint([]byte(c.sql))
		if c.err {
			if !errors.Is(err, ErrHint) {
				t.Errorf("%s: got %+v, %v; want ErrHint", c.sql, h, err)
			}
			continue
		}
		if err != nil || string(h.Key) != c.key || string(h.Colo) != c.colo || string(h.Shard) != c.shard {
			t.Errorf("%s: got key %q colo %q shard %q err %v", c.sql, h.Key, h.Colo, h.Shard, err)
		}
	}
}

func TestReadSet(t *testing.T) {
	cases := []struct {
		sql          string
		found, bad   bool
		name, value  string
		local, reset bool
	}{
		{sql: `SET pgturnstile.shard_key = '42'`, found: true, name: "shard_key", value: "42"},
		{sql: `set LOCAL PgTurnstile.Shard_Key TO 42;`, found: true, name: "shard_key", value: "42", local: true},
		{sql: `SET SESSION pgturnstile.colo = org`, found: true, name: "colo", value: "org"},
		{sql: `SET pgturnstile.shard_key = -5`, found: true, name: "shard_key", value: "-5"},
		{sql: `SET pgturnstile.shard = 'app_s1'`, found: true, name: "shard", value: "app_s1"},
		{sql: `RESET pgturnstile.shard_key`, found: true, name: "shard_key", reset: true},
		{sql: `SET pgturnstile.shard_key TO DEFAULT`, found: true, name: "shard_key", reset: true},
		{sql: `SET pgturnstile.nope = 1`, found: true, bad: true},
		{sql: `SET pgturnstile.shard_key = 1, 2`, found: true, bad: true},
		{sql: `SET pgturnstile.shard_key = 1; SELECT 1`, found: true, bad: true},
		{sql: `SET pgturnstile.shard_key = E'\x41'`, found: true, bad: true},
		{sql: `SET search_path = app`},
		{sql: `SELECT 1`},
		{sql: `SET LOCAL statement_timeout = 5`},
	}
	for _, c := range cases {
		sh, found, err := ReadSet([]byte(c.sql))
		if found != c.found || (err != nil) != c.bad {
			t.Errorf("%s: found %v err %v", c.sql, found, err)
			continue
		}
		if !c.found || c.bad {
			continue
		}
		if sh.Name != c.name || string(sh.Value) != c.value || sh.Local != c.local || sh.Reset != c.reset {
			t.Errorf("%s: got %+v", c.sql, sh)
		}
	}
}

package admin

import (
	"strings"
	"testing"

	"github.com/pgturnstile/pgturnstile/wire"
)

// FuzzParseCommand: the parser never panics, its errors are *Error, and a
// whole console session over the same text never panics either.
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{
		"SHOW POOLS;", "show help", "SELECT version", "PAUSE my-db", `PAUSE "a""b"`,
		"KILL_CLIENT 12", "SET default_pool_size = 5", "set x to 'a''b'", `SET "k" = "v"`,
		"SET USER bob = 'max_user_connections=4 pool_mode=session'", "SET POOL bob.d2 = 'pool_size=3';",
		`SET USER "odd@user" to 'pool_size=0x10'`, "SHUTDOWN WAIT_FOR_CLIENTS", "", ";", "\x00", "SET USER = ''",
		strings.Repeat("a", 300),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		cmd, err := ParseCommand(q)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if cmd.Verb == VerbSetUser {
			_, _ = ParseUserSettings(cmd.Value)
		}
		if cmd.Verb == VerbSetPool {
			_, _, _ = SplitPoolName(cmd.Arg)
			_, _ = ParsePoolSettings(cmd.Value)
		}
		for _, role := range []Role{RoleAdmin, RoleStats} {
			in := wire.AppendQuery(nil, strings.ReplaceAll(q, "\x00", ""))
			if _, err := runRaw(t, newFake(), role, in); err != nil {
				t.Fatalf("Serve: %v", err)
			}
		}
	})
}

package admin

import (
	"regexp"
	"strings"
)

// The console grammar, as PgBouncer's admin.c regexes (POSIX, case
// insensitive) with Cloudflare's fork additions: the bare-word class also
// takes '.' and '-' (PAUSE my-db), and SET USER / SET POOL exist.
const (
	ws0    = `[ \t\n\r]*`
	ws1    = `[ \t\n\r]+`
	word   = `("(?:[^"]|"")*"|[0-9a-z_.\-]+)`
	name   = `("(?:[^"]|"")+"|[0-9a-z_.\-]+)`
	str    = `('(?:[^']|'')*')`
	assign = ws0 + `(?:=|to)` + ws0
	end    = ws0 + `(?:;` + ws0 + `)?$`
)

var (
	rxNormal  = regexp.MustCompile(`(?i)^` + ws0 + word + `(?:` + ws1 + word + `)?` + end)
	rxSetStr  = regexp.MustCompile(`(?i)^` + ws0 + `set` + ws1 + word + assign + str + end)
	rxSetWord = regexp.MustCompile(`(?i)^` + ws0 + `set` + ws1 + word + assign + word + end)
	rxSetUser = regexp.MustCompile(`(?i)^` + ws0 + `set` + ws1 + `user` + ws1 + name + assign + str + end)
	rxSetPool = regexp.MustCompile(`(?i)^` + ws0 + `set` + ws1 + `pool` + ws1 + name + assign + str + end)
	// pgturnstile's PAUSE SHARD cluster.colo [RANGE] and RESUME SHARD.
	rxShard = regexp.MustCompile(`(?i)^` + ws0 + `(pause|resume)` + ws1 + `shard` + ws1 + name + `(?:` + ws1 + word + `)?` + end)
)

// Buffer limits of PgBouncer's parser (cmd[16], arg[64], val[256]) and the
// fork's (name 127, literal 255 bytes): a longer token, quotes included, is
// "bad arguments".
const (
	maxCmd     = 16
	maxArg     = 64
	maxVal     = 256
	maxSetName = 128
)

// Verbs of Command besides the command words themselves.
const (
	VerbSet     = "set"
	VerbSetUser = "set user"
	VerbSetPool = "set pool"
	// VerbPauseShard and VerbResumeShard: Arg is "cluster.colo", Value
	// the range ("" for all of the colocation's).
	VerbPauseShard  = "pause shard"
	VerbResumeShard = "resume shard"
)

// Command is one parsed console statement.
type Command struct {
	// Verb is the command word in lower case ("show", "select", "pause",
	// "kill_client", ...; not checked against the command list), or
	// VerbSet, VerbSetUser, VerbSetPool.
	Verb string
	// Arg is the unquoted argument: the SHOW subject, a database, a client
	// id, the SET key, the SET USER user or the SET POOL "user.db"; "" when
	// absent.
	Arg string
	// Value is the unquoted SET value or SET USER/POOL settings string.
	Value string
}

// ParseCommand parses one query text of the simple query protocol. Errors
// are *Error with PgBouncer's texts: "invalid command '<q>', use SHOW HELP;"
// when nothing matches, "bad arguments" when a token is too long.
func ParseCommand(q string) (Command, error) {
	if i := strings.IndexByte(q, 0); i >= 0 {
		q = q[:i] // a C string ends at the first NUL
	}
	if m := rxShard.FindStringSubmatch(q); m != nil {
		if len(m[2]) >= maxArg || len(m[3]) >= maxArg {
			return Command{}, errBadArguments
		}
		return Command{Verb: strings.ToLower(m[1]) + " shard", Arg: unquote(m[2], '"'), Value: unquote(m[3], '"')}, nil
	}
	if m := rxNormal.FindStringSubmatch(q); m != nil {
		if len(m[1]) >= maxCmd || len(m[2]) >= maxArg {
			return Command{}, errBadArguments
		}
		return Command{Verb: strings.ToLower(unquote(m[1], '"')), Arg: unquote(m[2], '"')}, nil
	}
	if m := rxSetStr.FindStringSubmatch(q); m != nil {
		return setCommand(VerbSet, m[1], m[2], maxArg, '\'')
	}
	if m := rxSetWord.FindStringSubmatch(q); m != nil {
		return setCommand(VerbSet, m[1], m[2], maxArg, '"')
	}
	if m := rxSetUser.FindStringSubmatch(q); m != nil {
		return setCommand(VerbSetUser, m[1], m[2], maxSetName, '\'')
	}
	if m := rxSetPool.FindStringSubmatch(q); m != nil {
		return setCommand(VerbSetPool, m[1], m[2], maxSetName, '\'')
	}
	return Command{}, syntaxError(q)
}

func setCommand(verb, key, val string, maxKey int, valQuote byte) (Command, error) {
	k := unquote(key, '"')
	if len(key) >= maxKey || len(val) >= maxVal || k == "" {
		return Command{}, errBadArguments
	}
	return Command{Verb: verb, Arg: k, Value: unquote(val, valQuote)}, nil
}

// unquote strips the quotes q of a token that starts with q and turns each
// doubled q inside into one; other tokens are returned as they are.
func unquote(s string, q byte) string {
	if len(s) < 2 || s[0] != q {
		return s
	}
	inner := s[1 : len(s)-1]
	return strings.ReplaceAll(inner, string([]byte{q, q}), string(q))
}

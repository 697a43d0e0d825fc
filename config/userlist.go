package config

import (
	"fmt"
	"strings"
)

const (
	// maxUserName: PgBouncer's MAX_USERNAME buffer is 128 bytes incl. NUL.
	maxUserName = 127
	// maxSecret: PgBouncer 1.26 accepts passwords up to 65535 bytes.
	maxSecret = 65535
)

// LoadUserlist reads an auth_file (userlist.txt): user name → secret.
func LoadUserlist(path string) (map[string]string, error) {
	data, err := readRegularFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot load auth_file: %w", err)
	}
	return ParseUserlist(path, data)
}

// ParseUserlist parses userlist.txt as PgBouncer does: each line holds
// "user" "secret" in double quotes ("" inside a field is a quote); the rest
// of the line is ignored; blank lines and lines starting with ';' are
// skipped. A secret is a plain password, "md5" + md5(password + user), or
// "SCRAM-SHA-256$<iter>:<salt>$<storedkey>:<serverkey>"; it is returned
// as written. A later line for the same user wins. Unlike PgBouncer, which
// stops loading at a broken line and keeps the users before it, any broken
// line is an error naming file:line.
func ParseUserlist(path string, data []byte) (map[string]string, error) {
	users := map[string]string{}
	text := string(data)
	for n := 1; text != ""; n++ {
		line, rest, _ := strings.Cut(text, "\n")
		text = rest
		s := strings.TrimLeft(line, blanks)
		if s == "" || s[0] == ';' {
			continue
		}
		errf := func(format string, args ...any) error {
			return &ParseError{File: path, Line: n, Msg: fmt.Sprintf(format, args...)}
		}
		user, s, ok := quotedField(s)
		if !ok {
			return nil, errf("broken auth file: expected \"user\" \"secret\"")
		}
		// PgBouncer skips whatever separates the two fields.
		if i := strings.IndexByte(s, '"'); i >= 0 {
			s = s[i:]
		}
		secret, _, ok := quotedField(s)
		if !ok {
			return nil, errf("broken auth file: expected a quoted secret after user %q", user)
		}
		if user == "" {
			return nil, errf("empty user name in auth file")
		}
		if len(user) > maxUserName {
			return nil, errf("user name too long in auth file (max %d bytes)", maxUserName)
		}
		if len(secret) > maxSecret {
			return nil, errf("password too long in auth file for user %q (max %d bytes)", user, maxSecret)
		}
		users[user] = secret
	}
	return users, nil
}

// quotedField reads a "double-quoted" field at the start of s.
func quotedField(s string) (field, rest string, ok bool) {
	if s == "" || s[0] != '"' {
		return "", s, false
	}
	end, ok := endQuote(s, 0)
	if !ok {
		return "", s, false
	}
	return strings.ReplaceAll(s[1:end-1], `""`, `"`), s[end:], true
}

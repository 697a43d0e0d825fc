// Package startupopts reads the options startup parameter as Postgres
// does (pg_split_opts, then -c name=value settings); what becomes of each
// setting (kept, ignored, refused) is the pooler's to decide.
package startupopts

import "strings"

// Setting is one name=value of the options parameter. Name has each '-'
// made '_', as Postgres reads a GUC name from the command line.
type Setting struct{ Name, Value string }

// Parse reads the settings of opts in order: "-c name=value",
// "-cname=value" or "--name=value". ok is false at the first argument
// that is none of those, or names nothing ("-c=", "--=x", on which
// PgBouncer once looped); the settings before it are returned, so the
// caller meets them in the order it would have.
func Parse(opts string) (settings []Setting, ok bool) {
	fields := Split(opts)
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		var kv string
		switch {
		case f == "-c" && i+1 < len(fields):
			i++
			kv = fields[i]
		case strings.HasPrefix(f, "-c") && len(f) > 2:
			kv = f[2:]
		case strings.HasPrefix(f, "--"):
			kv = f[2:]
		default:
			return settings, false
		}
		k, v, found := strings.Cut(kv, "=")
		if !found || k == "" {
			return settings, false
		}
		settings = append(settings, Setting{Name: strings.ReplaceAll(k, "-", "_"), Value: v})
	}
	return settings, true
}

// Split splits the options startup parameter as Postgres does
// (pg_split_opts): at ASCII whitespace, a backslash taking the next
// character literally, so `-c application_name=a\ b` carries a value with
// a space. A trailing backslash is dropped, as there.
func Split(s string) []string {
	var out []string
	var b strings.Builder
	inField, escaped := false, false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case escaped:
			b.WriteByte(ch)
			escaped = false
		case ch == '\\':
			escaped, inField = true, true
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\v' || ch == '\f' || ch == '\r':
			if inField {
				out = append(out, b.String())
				b.Reset()
				inField = false
			}
		default:
			b.WriteByte(ch)
			inField = true
		}
	}
	if inField {
		out = append(out, b.String())
	}
	return out
}

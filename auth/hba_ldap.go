package auth

// The ldap method of auth_hba_file. Its options are not read as pg_hba
// fields: PgBouncer hands the raw text after the method to its LDAP
// option parser (ParseLDAPOptions), which has its own quoting ("ldapport"=
// is a name, a comma may start an option), so we do the same.

import "strings"

// parseLDAP parses the options after the method of ln, a record already
// read by record.
func (r *hbaRule) parseLDAP(file string, ln hbaLine) error {
	opts, err := ParseLDAPOptions(hbaRawAfter(ln.text, r.ldapAfter))
	if err != nil {
		return &HBAError{File: file, Line: ln.num, Msg: err.Error()}
	}
	r.LDAP = opts
	return nil
}

// hbaRawAfter returns the text of line after its first n fields (as hbaLex
// splits them), up to a # outside double quotes.
func hbaRawAfter(line string, n int) string {
	i := 0
	skip := func() {
		for i < len(line) && hbaBlank(line[i]) {
			i++
		}
	}
	for ; n > 0; n-- {
		skip()
		for {
			_, w, msg := hbaLexWord(line[i:])
			if msg != "" {
				return ""
			}
			i += w
			skip()
			if i < len(line) && line[i] == ',' {
				i++
				skip()
				continue
			}
			break
		}
	}
	rest := line[i:]
	inQuote := false
	for j := 0; j < len(rest); j++ {
		switch rest[j] {
		case '"':
			inQuote = !inQuote
		case '#':
			if !inQuote {
				return strings.TrimSpace(rest[:j])
			}
		}
	}
	return strings.TrimSpace(rest)
}

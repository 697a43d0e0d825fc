package auth

// auth_ident_file: PgBouncer's subset of pg_ident.conf
// (https://www.pgbouncer.org/config.html#ident-map-file-format), the user
// name maps that auth_hba_file's map= option names for cert and peer.
//
//	MAPNAME  SYSTEM-USERNAME  PG-USERNAME
//
// One mapping per line, with pg_hba.conf's words (double quotes, '#'
// comments, backslash continuation). SYSTEM-USERNAME is the certificate
// name or the peer's OS user, compared as it is; PG-USERNAME is one user
// name, or the keyword all for any user. Like PgBouncer there are no
// regular expressions, no +group and no include directives; where
// PgBouncer would take a "/regex" or "+group" word literally, so that it
// silently never matches, we report the line, as ParseHBA does.

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// IdentMap is one named map: its mappings in file order.
type IdentMap struct {
	Name     string
	Mappings []IdentMapping
}

// IdentMapping is one line of a map.
type IdentMapping struct {
	System   string // certificate name or OS user name
	User     string // the user name the client may log in as
	AllUsers bool   // PG-USERNAME was the keyword all
}

// Ident is a parsed auth_ident_file; immutable once parsed.
type Ident struct {
	maps map[string]*IdentMap
}

// Map returns the map called name.
func (id *Ident) Map(name string) (*IdentMap, bool) {
	if id == nil {
		return nil, false
	}
	m, ok := id.maps[name]
	return m, ok
}

// Allows reports whether the map lets a client log in as user, where
// system reports whether a mapping's SYSTEM-USERNAME is the client's
// (its certificate names it, or it is the peer's OS user). The first
// mapping that matches both decides, as in PgBouncer.
func (m *IdentMap) Allows(system func(string) bool, user string) (IdentMapping, bool) {
	for _, mp := range m.Mappings {
		if !system(mp.System) {
			continue
		}
		if mp.AllUsers || mp.User == user {
			return mp, true
		}
	}
	return IdentMapping{}, false
}

// LoadIdent reads and parses the auth_ident_file at path.
func LoadIdent(path string) (*Ident, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseIdent(path, data)
}

// ParseIdent parses an auth_ident_file read from path (used in errors).
// Like ParseHBA it returns the maps from the lines that parsed together
// with one *HBAError per bad line.
func ParseIdent(path string, data []byte) (*Ident, error) {
	id := &Ident{maps: map[string]*IdentMap{}}
	var errs []error
	for _, ln := range hbaLines(data) {
		fields, msg := hbaLex(ln.text, false)
		if msg == "" && len(fields) == 0 {
			continue
		}
		if msg == "" {
			msg = id.line(fields)
		}
		if msg != "" {
			errs = append(errs, &HBAError{File: path, Line: ln.num, Msg: msg})
		}
	}
	switch len(errs) {
	case 0:
		return id, nil
	case 1:
		return id, errs[0]
	}
	return id, errors.Join(errs...)
}

// line adds one mapping; it returns a message for a bad line.
func (id *Ident) line(fields []hbaField) string {
	for _, f := range fields {
		if len(f) > 1 {
			return "comma-separated lists are not supported in an ident map"
		}
	}
	switch {
	case len(fields) < 3:
		return "an ident map line needs MAPNAME SYSTEM-USERNAME PG-USERNAME"
	case len(fields) > 3:
		// PgBouncer's words for anything after the third field.
		return "unsupported parameters"
	}
	name, system, user := fields[0][0], fields[1][0], fields[2][0]
	if name.quoted {
		return fmt.Sprintf("invalid ident map name %q (map names are not quoted)", name.text)
	}
	if !system.quoted && strings.HasPrefix(system.text, "/") {
		return fmt.Sprintf("regular expressions are not supported: %q (quote the name if it starts with /)", system.text)
	}
	mp := IdentMapping{System: system.text, User: user.text}
	switch {
	case !user.quoted && user.text == "all":
		mp.User, mp.AllUsers = "", true
	case !user.quoted && strings.HasPrefix(user.text, "+"):
		return fmt.Sprintf("group names are not supported: %q", user.text)
	case !user.quoted && strings.HasPrefix(user.text, "/"):
		return fmt.Sprintf("regular expressions are not supported: %q (quote the name if it starts with /)", user.text)
	}
	m := id.maps[name.text]
	if m == nil {
		m = &IdentMap{Name: name.text}
		id.maps[name.text] = m
	}
	m.Mappings = append(m.Mappings, mp)
	return ""
}

// LoadIdentMaps reads the auth_ident_file at identFile, when set, and
// gives each rule of h with map= its map (ResolveMaps). As in PgBouncer
// the file is read only for auth_type=hba (the only way to name a map),
// at start and on every RELOAD, with the auth_hba_file (hbaFile, for the
// errors); a map= naming a map the file lacks is an error, so RELOAD
// keeps the rules in force.
func LoadIdentMaps(h *HBA, hbaFile, identFile string) error {
	var id *Ident
	if identFile != "" {
		var err error
		if id, err = LoadIdent(identFile); err != nil {
			return err
		}
	}
	return h.ResolveMaps(hbaFile, id)
}

// ResolveMaps attaches to each rule with map= the map it names in id, and
// reports a rule whose map id lacks (PgBouncer skips that line with
// "Ident map X is not found in ident config file"; a rule that cannot
// admit anyone is reported here, as ParseHBA reports bad lines). file is
// the auth_hba_file's name, for the errors.
func (h *HBA) ResolveMaps(file string, id *Ident) error {
	if h == nil {
		return nil
	}
	var errs []error
	for i := range h.rules {
		r := &h.rules[i]
		name, ok := r.Options["map"]
		if !ok {
			continue
		}
		m, ok := id.Map(name)
		if !ok {
			errs = append(errs, &HBAError{File: file, Line: r.Line, Msg: fmt.Sprintf("Ident map %s is not found in ident config file", name)})
			continue
		}
		r.Ident = m
	}
	return errors.Join(errs...)
}

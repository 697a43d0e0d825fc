package takeover

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/pgturnstile/pgturnstile/config"
)

// CheckRow says whether a SHOW FDS row is one a pgturnstile sends: a known
// task, with the state that task needs. Its descriptor is internal/fdcheck's.
func CheckRow(task string, row map[string]string, st State) error {
	switch task {
	case "pooler":
		if st.Network != "tcp" && st.Network != "unix" || st.Metrics && st.Network != "tcp" {
			return fmt.Errorf("a listener of network %q", st.Network)
		}
		return nil
	case "client", "server":
	default:
		return fmt.Errorf("unknown task %q", task)
	}
	user, db := row["user"], row["database"]
	switch {
	case user == "" || db == "":
		return errors.New("no user or no database")
	case db == consoleDB:
		return errors.New("a console session, which never moves")
	}
	for name, v := range st.Params {
		if name == "" || strings.IndexByte(name, 0) >= 0 || strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("parameter %q is not one a client can set", name)
		}
	}
	for _, ms := range st.Stmts {
		if strings.IndexByte(ms.Name, 0) >= 0 || strings.IndexByte(ms.Query, 0) >= 0 {
			return fmt.Errorf("prepared statement %q is not one a client can prepare", ms.Name)
		}
	}
	key, err := hex.DecodeString(st.Key)
	if task == "client" {
		if err != nil || len(key) != 8 {
			return errors.New("a cancel key that is not 8 bytes")
		}
		if !st.Local {
			if _, err := netip.ParseAddrPort(st.Raddr); err != nil {
				return fmt.Errorf("client address: %v", err)
			}
			if _, err := netip.ParseAddrPort(st.Laddr); err != nil {
				return fmt.Errorf("local address: %v", err)
			}
		}
		return nil
	}
	switch {
	case err != nil || len(key) < 4:
		return errors.New("a backend key that is not at least 4 bytes")
	case st.PID == 0:
		return errors.New("no backend pid")
	case st.Endpoint == "":
		return errors.New("no endpoint")
	}
	return nil
}

// checkLinks refuses the rows' links unless each is what SUSPEND makes: a
// client and a server of the same database naming each other, each server
// linked to one client at most. The pool mode and the users are
// CheckConfig's, against the configuration.
func (h *Handover) checkLinks() error {
	rows := map[int]*Row{}
	servers := map[int]*Row{}
	for i := range h.Servers {
		m := &h.Servers[i]
		if _, dup := rows[m.OldFD]; dup {
			return fmt.Errorf("two rows with descriptor %d", m.OldFD)
		}
		rows[m.OldFD], servers[m.OldFD] = m, m
	}
	for i := range h.Clients {
		m := &h.Clients[i]
		if _, dup := rows[m.OldFD]; dup {
			return fmt.Errorf("two rows with descriptor %d", m.OldFD)
		}
		rows[m.OldFD] = m
	}
	linkedBy := map[int]int{} // a server's descriptor: its client's
	for _, m := range h.Clients {
		if m.Link == 0 {
			continue
		}
		srv := servers[m.Link]
		switch {
		case srv == nil:
			return fmt.Errorf("client %s@%s is linked to %d, which is no server row", m.User, m.Database, m.Link)
		case linkedBy[m.Link] != 0:
			return fmt.Errorf("server %d is linked to two clients", m.Link)
		case srv.Link != m.OldFD:
			return fmt.Errorf("client %d is linked to server %d, which is linked to %d", m.OldFD, m.Link, srv.Link)
		case srv.Database != m.Database:
			return fmt.Errorf("client of %q linked to a server of %q", m.Database, srv.Database)
		}
		linkedBy[m.Link] = m.OldFD
	}
	for _, m := range h.Servers {
		if m.Link != 0 && linkedBy[m.OldFD] != m.Link {
			return fmt.Errorf("server %d is linked to %d, which is no client row linked to it", m.OldFD, m.Link)
		}
	}
	return nil
}

// CheckConfig refuses a takeover (the pooler's New fails, the command
// aborts it and the old process goes on) when a client or server handed
// over is of a database cfg does not serve, or of a user who could not
// log in here: not in auth_file (hasSecret), with no auth_query and an
// auth_type that needs one of the two. The old process's configuration
// and this one can differ, and a row is not to be trusted for more than it
// can show.
func CheckConfig(cfg *config.Config, clients, servers []Row, hasSecret func(user string) bool) error {
	for _, m := range servers {
		if err := checkMoved(cfg, m, true, hasSecret); err != nil {
			return fmt.Errorf("%w: server %s@%s: %v", ErrRefused, m.User, m.Database, err)
		}
	}
	byFD := map[int]Row{}
	for _, m := range servers {
		byFD[m.OldFD] = m
	}
	for _, m := range clients {
		err := checkMoved(cfg, m, false, hasSecret)
		if err == nil && m.Link != 0 {
			err = checkLinked(cfg, m, byFD[m.Link])
		}
		if err != nil {
			return fmt.Errorf("%w: client %s@%s: %v", ErrRefused, m.User, m.Database, err)
		}
	}
	return nil
}

// checkLinked refuses a client handed over linked to a server (srv) unless
// this configuration serves it in session mode, and its pool's servers log
// in as srv's user: the session goes on on that server, as its client's
// own.
func checkLinked(cfg *config.Config, m, srv Row) error {
	db, _ := cfg.LookupDatabase(m.Database) // checkMoved found it
	if mode := cfg.Resolve(db, m.User).PoolMode; mode != config.PoolModeSession {
		return fmt.Errorf("linked to a server, in pool_mode %s (only a session-mode client keeps one)", mode)
	}
	login := m.User
	if db.User != "" {
		login = db.User
	}
	if srv.User != login {
		return fmt.Errorf("linked to a server of user %q, not %q", srv.User, login)
	}
	return nil
}

func checkMoved(cfg *config.Config, m Row, server bool, hasSecret func(string) bool) error {
	db, ok := cfg.LookupDatabase(m.Database)
	if !ok {
		return fmt.Errorf("database %q is not served here", m.Database)
	}
	if server && db.User != "" {
		// A forced user's pool: its servers log in as db.User.
		if m.User != db.User {
			return fmt.Errorf("the database's servers log in as %q", db.User)
		}
		return nil
	}
	if hasSecret(m.User) {
		return nil
	}
	st := &cfg.Settings
	switch st.AuthType {
	case "any", "cert", "hba", "ldap", "pam":
		// Logins that do not need auth_file: the user may be anyone
		// these admit.
		return nil
	}
	if (db.AuthUser != "" || st.AuthUser != "") && st.AuthQuery != "" {
		return nil // auth_query finds its users
	}
	return fmt.Errorf("user %q is not in auth_file", m.User)
}

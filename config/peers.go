package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Peer is one [peers] entry, "ID = host=... port=... pool_size=...": where
// a cancel request whose key carries peer id ID is forwarded (PgBouncer
// 1.23+ peering). An entry for the process's own peer_id is allowed, so
// that every process of a group can share one [peers] section, and never
// used.
type Peer struct {
	ID   int
	Host string // a name or address, or a Unix socket directory ("/...", "@..." abstract)
	Port int    // default 6432
	// PoolSize bounds the cancel requests in flight to this peer at once;
	// < 0: default_pool_size.
	PoolSize int
	File     string
	Line     int
}

// maxPeerID is the largest id a [peers] key may have: the cancel key
// carries it in two bytes.
const maxPeerID = 0xFFFF

// defaultPeerPort is a peer's port when its entry names none (PgBouncer's
// default listen_port).
const defaultPeerPort = 6432

// peer parses one [peers] line with PgBouncer's rules and messages
// (loader.c parse_peer): the key is an id from 1 to 65535; host is
// required; port and pool_size are read as C's atoi does; any other
// parameter is an error. A repeated id replaces the earlier entry.
func (p *parser) peer(file string, n int, name, val string) error {
	errf := func(format string, args ...any) error {
		return &ParseError{File: file, Line: n, Msg: fmt.Sprintf(format, args...)}
	}
	id, err := strconv.Atoi(name)
	if err != nil || id < 1 || id > maxPeerID {
		return errf("ids of peers must be a number larger than 0 and at most 65536")
	}
	pairs, err := parseConnstr(val)
	if err != nil {
		return errf("syntax error in connection string")
	}
	pe := &Peer{ID: id, Port: defaultPeerPort, PoolSize: -1, File: file, Line: n}
	for _, kv := range pairs {
		switch kv.key {
		case "host":
			pe.Host = kv.val
		case "port":
			pe.Port = atoi(kv.val)
			// PgBouncer refuses only 0 (no digits); a port no socket can
			// have is refused here too, in the same words.
			if pe.Port <= 0 || pe.Port > 65535 {
				return errf("invalid port: %s", kv.val)
			}
		case "pool_size":
			pe.PoolSize = atoi(kv.val)
		default:
			return errf("unrecognized connection parameter: %s", kv.key)
		}
	}
	if pe.Host == "" {
		return errf("host was not provided for peer %d", id)
	}
	p.c.Peers[id] = pe
	return nil
}

// atoi is C's atoi: leading blanks, an optional sign, then as many digits
// as there are; 0 when there are none. Values beyond an int32 saturate.
func atoi(s string) int {
	s = strings.TrimLeft(s, blanks)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	v := 0
	for i := 0; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if v < 1<<31 {
			v = v*10 + int(s[i]-'0')
		}
	}
	v = min(v, 1<<31-1)
	if neg {
		return -v
	}
	return v
}

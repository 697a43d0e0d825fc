package takeover

import (
	"encoding/json"
	"errors"
	"net"
	"time"

	"github.com/pgturnstile/pgturnstile/auth"
)

// State is SHOW FDS's pgturnstile_state: the part of a client's session
// (or a listener's identity) PgBouncer's columns do not carry.
type State struct {
	// Listeners.
	Network string `json:"network,omitempty"` // "tcp" or "unix"
	Address string `json:"address,omitempty"`
	Metrics bool   `json:"metrics,omitempty"` // metrics_addr's, not a pooler listener

	// Clients.
	Key       string                  `json:"key,omitempty"` // the cancel key, hex
	Params    map[string]string       `json:"params,omitempty"`
	Stmts     []Stmt                  `json:"stmts,omitempty"`
	Local     bool                    `json:"local,omitempty"`
	UnixPeer  string                  `json:"unix_peer,omitempty"`
	Raddr     string                  `json:"raddr,omitempty"`
	Laddr     string                  `json:"laddr,omitempty"`
	Connected time.Time               `json:"connected,omitzero"`
	Cred      *auth.ServerCredentials `json:"cred,omitempty"`

	// Servers (and Params, Stmts, Connected above).
	PID      uint32 `json:"pid,omitempty"`
	Endpoint string `json:"endpoint,omitempty"` // the address it dialled
	// Unreported and UnreportedDirty are the server's record of the
	// tracked parameters Postgres does not report (the pooler's
	// server.unreported): without it the new process would not know to
	// RESET a search_path an earlier client had, and would hand it to
	// the next one.
	Unreported      map[string]string `json:"unreported,omitempty"`
	UnreportedDirty bool              `json:"unreported_dirty,omitempty"`
}

// Stmt is one of a client's named prepared statements, or one a server
// has prepared.
type Stmt struct {
	Name  string `json:"name"` // the client's name; a server's: the name on Postgres
	Query string `json:"query"`
	Types []byte `json:"types,omitempty"` // the Parse's parameter-type section
	// Stale marks a client's name whose description is older than its
	// statement's shape: it stays refused with 0A000 in the new process.
	// An older process never sets it.
	Stale bool `json:"stale,omitempty"`
}

// Marshal is st as SHOW FDS's pgturnstile_state column.
func Marshal(st State) string {
	b, err := json.Marshal(st)
	if err != nil {
		panic("BUG: takeover: " + err.Error())
	}
	return string(b)
}

// ListenerID marks a SHOW FDS row's ID as a listener's index, apart from
// client ids (which count from 1 and never reach it); MetricsID is the
// metrics_addr listener's.
const (
	ListenerID = 1 << 63
	MetricsID  = ListenerID | 1<<62
)

// consoleDB is the console's database and the user the new process logs
// in as (admin's "pgbouncer"): a row of it is a console session, which
// never moves.
const consoleDB = "pgbouncer"

// ErrRefused wraps every reason a takeover is refused: the process on the
// socket is not one to trust, or what it handed over is not what a
// pgturnstile hands over, or not what this configuration serves. Nothing
// it sent is used, and the old process goes on.
var ErrRefused = errors.New("takeover refused")

// ErrNoOldProcess is TakeOver's answer when nothing listens on the Unix
// socket: there is no process to take over (PgBouncer then starts
// normally).
var ErrNoOldProcess = errors.New("old process not found")

// Handover is what an online restart took over from the old process:
// its listeners, its clients at rest and its idle servers, each with its
// descriptor. Until Commit they are still the old process's too, and
// Abort gives them back.
type Handover struct {
	Listeners []net.Listener
	// Metrics is the old process's metrics_addr listener; nil if none.
	Metrics net.Listener
	// Clients and Servers are the client and server rows, each with the
	// descriptor received with it.
	Clients, Servers []Row
	// conn is the console session with the old process, until Commit
	// or Abort.
	conn *conn
}

// Row is one client or server row of SHOW FDS, as the new process read
// it.
type Row struct {
	// FD is the descriptor received with the row, this process's.
	FD             int
	User, Database string
	State          State
	// OldFD and Link are the row's fd and link columns: its descriptor
	// in the old process, and that of the row it is linked to (0: none),
	// a session-mode client and its server (checkLinks).
	OldFD, Link int
}

package admin

import (
	"encoding/hex"
	"os"
)

// SHOW FDS and the online restart's side of the console.
//
// An online restart (pgturnstile -R) logs in to the running process's
// console over the Unix socket as the pooler's own OS user, sends SUSPEND,
// then SHOW FDS, then SHUTDOWN, as PgBouncer's takeover does. Over such a
// session SHOW FDS sends each row's descriptor with the row (SCM_RIGHTS:
// FDSender), and the SHUTDOWN that follows hands the listed clients and
// listeners over instead of ending the process at once. Anywhere else SHOW
// FDS is a plain table (admin only: it shows passwords, as PgBouncer's).

// FDSender writes msg to the console's client with fd attached to its
// first byte (SCM_RIGHTS), after everything written before it.
type FDSender func(msg []byte, fd int) error

// fdsRows is SHOW FDS as a plain table; the descriptors are closed.
func fdsRows(c Console) [][]value {
	rows := c.FDs(false)
	out := make([][]value, 0, len(rows))
	for _, r := range rows {
		out = append(out, fdValues(r))
		if r.FD >= 0 {
			closeFD(r.FD)
		}
	}
	return out
}

func fdValues(r FD) []value {
	return []value{num(r.FD), text(r.Task), textOrNull(r.User), textOrNull(r.Database),
		text(r.Addr), num(r.Port), num(r.Cancel), num(r.Link),
		textOrNull(r.ClientEncoding), textOrNull(r.StdStrings), textOrNull(r.DateStyle), textOrNull(r.TimeZone),
		textOrNull(r.Password), byteaOrNull(r.ScramClientKey), byteaOrNull(r.ScramServerKey), textOrNull(r.State)}
}

// byteaOrNull is a bytea cell in Postgres' hex output format.
func byteaOrNull(b []byte) value {
	if len(b) == 0 {
		return value{null: true}
	}
	return text(`\x` + hex.EncodeToString(b))
}

// showFDs answers SHOW FDS on a session that can pass descriptors: each
// DataRow goes out with its descriptor, and the IDs are kept for the
// SHUTDOWN that hands them over.
func (s *session) showFDs() error {
	rows := s.con.FDs(true)
	defer func() {
		for _, r := range rows {
			if r.FD >= 0 {
				closeFD(r.FD)
			}
		}
	}()
	s.buf = appendRowDescription(s.buf, fdsCols)
	if err := s.flush(); err != nil {
		return err
	}
	ids := make([]uint64, 0, len(rows))
	for _, r := range rows {
		if r.FD < 0 {
			continue // nothing to hand over: not listed
		}
		msg := appendDataRow(nil, fdValues(r))
		if err := s.sendFD(msg, r.FD); err != nil {
			return err
		}
		ids = append(ids, r.ID)
	}
	s.handover = ids
	s.complete("SHOW")
	return nil
}

// closeFD closes a descriptor FDs duplicated.
func closeFD(fd int) { os.NewFile(uintptr(fd), "fd").Close() }

package pooler

import "log/slog"

// A line about a client or a server carries who it is about as these
// attributes rather than in its message. The command's line handler
// writes them as PgBouncer's prefix, "C-7: appdb/app@127.0.0.1:5555 "
// (log_socket_prefix), its JSON handler as fields of their own, so that a
// log pipeline can select a client's lines without parsing the message.
const (
	LogKeyConn = "conn" // C-n for a client, S-n for a server
	LogKeyDB   = "db"   // absent before the startup packet names it
	LogKeyUser = "user" // likewise
	LogKeyAddr = "addr" // the peer: host:port, [v6]:port, unix(pid):port
)

// logger is the service's logger with the client's prefix attributes. It
// is built for each line rather than kept: logging a client is rare, and
// thousands of idle clients should not each hold a logger.
func (c *client) logger() *slog.Logger {
	addr := c.unixPeer
	if !c.local {
		addr = c.raddr.String()
	}
	attrs := []any{LogKeyConn, c.String()}
	if c.dbName != "" {
		attrs = append(attrs, LogKeyDB, c.dbName)
	}
	if c.user != "" {
		attrs = append(attrs, LogKeyUser, c.user)
	}
	return c.svc.log.With(append(attrs, LogKeyAddr, addr)...)
}

// serverLogger is the service's logger with server s's prefix
// attributes, its address the one it dials (host:port as configured):
// s.conn may be written by its login while another goroutine logs.
func (p *serverPool) serverLogger(s *server) *slog.Logger {
	return p.serverLoggerAt(s, s.ep.address)
}

// serverLoggerAt is serverLogger with the peer's address as connected.
func (p *serverPool) serverLoggerAt(s *server, addr string) *slog.Logger {
	return p.svc.log.With(LogKeyConn, s.String(), LogKeyDB, p.key.db, LogKeyUser, p.key.user, LogKeyAddr, addr)
}

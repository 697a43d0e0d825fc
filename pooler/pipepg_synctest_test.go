package pooler

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// pipePG is a fake Postgres for the synctest timing tests: the Service's
// dial hook gets one end of a net.Pipe per connection, and a goroutine of
// the fake speaks just enough protocol on the other. Pipes, unlike TCP
// sockets, block durably inside a synctest bubble, so fake time advances
// whenever the pooler, the fake and the test clients all wait.
//
//   - login: StartupMessage gets AuthenticationOk, the reported
//     ParameterStatus messages, BackendKeyData (ProcessID = the fake's
//     pid, numbered from 1 in login order) and ReadyForQuery 'I'; a
//     CancelRequest is recorded.
//   - Query: CommandComplete with the statement's first word as its tag,
//     then ReadyForQuery ('T' after BEGIN until COMMIT or ROLLBACK).
//     SLEEP takes 10 s, or ends with ERROR 57014 when a CancelRequest for
//     its backend arrives.
//   - Terminate, or the pooler closing its end, ends the backend; how it
//     ended is recorded by pid, so a test can tell which server was closed.
type pipePG struct {
	mu      sync.Mutex
	nextPID int
	conns   map[int]net.Conn // open backends by pid
	ended   map[int]string   // pid -> "terminate" or "eof"
	cancels []int            // pids named by CancelRequests
	cancel  map[int]chan struct{}
	closing bool // closeAll ran: logins are refused
}

func newPipePG() *pipePG {
	return &pipePG{conns: map[int]net.Conn{}, ended: map[int]string{}, cancel: map[int]chan struct{}{}}
}

// dial is the Service's dial hook.
func (pg *pipePG) dial(ctx context.Context, network, address string) (net.Conn, error) {
	pg.mu.Lock()
	closing := pg.closing
	pg.mu.Unlock()
	if closing {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errFakeDown}
	}
	pooler, backend := net.Pipe()
	go pg.serve(backend)
	return pooler, nil
}

var errFakeDown = &fakeDownError{}

type fakeDownError struct{}

func (*fakeDownError) Error() string { return "connection refused (fake Postgres closed)" }

// serve is one backend: a cancel request, or a login and then a session,
// after which it records how the backend ended.
func (pg *pipePG) serve(conn net.Conn) {
	defer conn.Close()
	be := pgproto3.NewBackend(conn, conn)
	msg, err := be.ReceiveStartupMessage()
	if err != nil {
		return
	}
	switch m := msg.(type) {
	case *pgproto3.CancelRequest:
		pg.cancelRequest(int(m.ProcessID))
		return
	case *pgproto3.StartupMessage:
	default:
		return
	}
	pid, cancelled := pg.register(conn)
	how := "eof"
	if pg.login(be, pid) {
		how = pg.session(be, cancelled)
	}
	pg.mu.Lock()
	delete(pg.conns, pid)
	pg.ended[pid] = how
	pg.mu.Unlock()
}

// cancelRequest records a cancel request for backend pid and interrupts
// its SLEEP if one is running.
func (pg *pipePG) cancelRequest(pid int) {
	pg.mu.Lock()
	pg.cancels = append(pg.cancels, pid)
	if ch := pg.cancel[pid]; ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	pg.mu.Unlock()
}

// register gives a new backend on conn its pid and the channel its cancel
// requests arrive on.
func (pg *pipePG) register(conn net.Conn) (int, chan struct{}) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	pg.nextPID++
	pid := pg.nextPID
	pg.conns[pid] = conn
	cancelled := make(chan struct{}, 1)
	pg.cancel[pid] = cancelled
	return pid, cancelled
}

// login accepts the startup as Postgres 16 would with trust
// authentication; false when the pooler is gone.
func (pg *pipePG) login(be *pgproto3.Backend, pid int) bool {
	be.Send(&pgproto3.AuthenticationOk{})
	for _, p := range [][2]string{
		{"application_name", ""}, {"client_encoding", "UTF8"}, {"DateStyle", "ISO, MDY"},
		{"server_version", "16.4"}, {"standard_conforming_strings", "on"}, {"TimeZone", "UTC"},
	} {
		be.Send(&pgproto3.ParameterStatus{Name: p[0], Value: p[1]})
	}
	be.Send(&pgproto3.BackendKeyData{ProcessID: uint32(pid), SecretKey: []byte{0, 0, 0, byte(pid)}})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	return be.Flush() == nil
}

// session answers simple queries until the backend ends, and returns how
// it ended: "eof", "terminate" or the unexpected message.
func (pg *pipePG) session(be *pgproto3.Backend, cancelled <-chan struct{}) string {
	tx := byte('I')
	for {
		msg, err := be.Receive()
		if err != nil {
			return "eof"
		}
		switch m := msg.(type) {
		case *pgproto3.Query:
			tx = answerPipeQuery(be, m.String, tx, cancelled)
			be.Send(&pgproto3.ReadyForQuery{TxStatus: tx})
			if be.Flush() != nil {
				return "eof"
			}
		case *pgproto3.Terminate:
			return "terminate"
		default:
			// Not needed by the timing tests: a protocol error would hide
			// what they look at, so the backend just ends.
			return fmt.Sprintf("unexpected %T", m)
		}
	}
}

// answerPipeQuery answers a simple query with its first word as the
// CommandComplete tag (SLEEP waits 10 s unless cancelled first) and
// returns the transaction status after it.
func answerPipeQuery(be *pgproto3.Backend, sql string, tx byte, cancelled <-chan struct{}) byte {
	tag, _, _ := strings.Cut(strings.TrimSpace(sql), " ")
	tag = strings.ToUpper(tag)
	switch tag {
	case "BEGIN":
		tx = 'T'
	case "COMMIT", "ROLLBACK":
		tx = 'I'
	}
	if tag == "SLEEP" {
		select {
		case <-cancelled:
			be.Send(&pgproto3.ErrorResponse{Severity: "ERROR", Code: "57014", Message: "canceling statement due to user request"})
		case <-time.After(10 * time.Second):
			be.Send(&pgproto3.CommandComplete{CommandTag: []byte(tag)})
		}
	} else {
		be.Send(&pgproto3.CommandComplete{CommandTag: []byte(tag)})
	}
	return tx
}

// endedHow reports how backend pid ended ("" while it is open).
func (pg *pipePG) endedHow(pid int) string {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	return pg.ended[pid]
}

// logins is how many backends have logged in.
func (pg *pipePG) logins() int {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	return pg.nextPID
}

// closeAll refuses further logins and closes every open backend.
func (pg *pipePG) closeAll() {
	pg.mu.Lock()
	pg.closing = true
	conns := make([]net.Conn, 0, len(pg.conns))
	for _, c := range pg.conns {
		conns = append(conns, c)
	}
	pg.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// pipeClient is a test client on one end of a net.Pipe whose other end the
// Service serves (serveConn).
type pipeClient struct {
	conn net.Conn
	fe   *pgproto3.Frontend
	key  []byte // the BackendKeyData the pooler gave it
}

// reply is what a client got for one request: the first ErrorResponse (nil
// if none), whether ReadyForQuery ended it, the read error that ended it
// otherwise (the pooler closed the client), and the fake time it ended.
type reply struct {
	err    *pgproto3.ErrorResponse
	ready  bool
	ioErr  error
	at     time.Time
	status byte
}

// String shows the error's fields rather than pointers, for failures.
func (r reply) String() string {
	s := fmt.Sprintf("{ready %v status %q at %s", r.ready, r.status, r.at.Format("15:04:05.000000000"))
	if r.err != nil {
		s += fmt.Sprintf(" error %s %s %q", r.err.Severity, r.err.Code, r.err.Message)
	}
	if r.ioErr != nil {
		s += " read error: " + r.ioErr.Error()
	}
	return s + "}"
}

// readReply reads up to ReadyForQuery or the end of the connection.
func (pc *pipeClient) readReply() reply {
	var r reply
	for {
		msg, err := pc.fe.Receive()
		if err != nil {
			r.ioErr, r.at = err, time.Now()
			return r
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			if r.err == nil {
				e := *m // Receive reuses its message structs
				r.err = &e
			}
		case *pgproto3.BackendKeyData:
			pc.key = binary.BigEndian.AppendUint32(nil, m.ProcessID)
			pc.key = append(pc.key, m.SecretKey...)
		case *pgproto3.ReadyForQuery:
			r.ready, r.status, r.at = true, m.TxStatus, time.Now()
			return r
		}
	}
}

// query sends a simple query and waits for its reply.
func (pc *pipeClient) query(sql string) reply {
	pc.fe.Send(&pgproto3.Query{String: sql})
	if err := pc.fe.Flush(); err != nil {
		return reply{ioErr: err, at: time.Now()}
	}
	return pc.readReply()
}

// queryAsync sends a simple query; its reply arrives on the channel.
func (pc *pipeClient) queryAsync(sql string) <-chan reply {
	ch := make(chan reply, 1)
	go func() { ch <- pc.query(sql) }()
	return ch
}

// close sends Terminate and closes the client's end.
func (pc *pipeClient) close() {
	// Bounded: a pooler that already closed the client's end does not
	// read it (the pipe then fails at once anyway).
	pc.conn.SetWriteDeadline(time.Now().Add(time.Second))
	pc.fe.Send(&pgproto3.Terminate{})
	pc.fe.Flush()
	pc.conn.Close()
}

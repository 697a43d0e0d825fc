package auth

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// pipeConn is a minimal Conn over a net.Conn, like the pooler's.
type pipeConn struct {
	be  *pgproto3.Backend
	r   *bufio.Reader
	buf []byte
}

func (p *pipeConn) Send(msg pgproto3.BackendMessage) error {
	p.be.Send(msg)
	return p.be.Flush()
}

func (p *pipeConn) ReadPassword() ([]byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(p.r, hdr[:]); err != nil {
		return nil, err
	}
	if hdr[0] != 'p' {
		return nil, fmt.Errorf("expected password message, got %q", hdr[0])
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n < 4 || n > 1<<20 {
		return nil, fmt.Errorf("bad length %d", n)
	}
	p.buf = append(p.buf[:0], make([]byte, n-4)...)
	_, err := io.ReadFull(p.r, p.buf)
	return p.buf, err
}

// serveOne accepts one pgx connection attempt on conn, authenticates it
// and, on success, finishes the startup so that pgconn.Connect returns.
func serveOne(conn net.Conn, m Method, lookup func(user string) *Secret) error {
	defer conn.Close()
	r := bufio.NewReader(conn)
	var lenBuf [4]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(lenBuf[:])-4)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	var sm pgproto3.StartupMessage
	if err := sm.Decode(body); err != nil {
		return err
	}
	user := sm.Parameters["user"]
	pc := &pipeConn{be: pgproto3.NewBackend(r, conn), r: r}
	_, err := Authenticate(pc, m, user, lookup(user))
	if err != nil {
		var ae *Error
		if errors.As(err, &ae) {
			pc.be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: ae.SQLState, Message: ae.Message})
			pc.be.Flush()
		}
		return err
	}
	pc.be.Send(&pgproto3.AuthenticationOk{})
	pc.be.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 2}})
	pc.be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	return pc.be.Flush()
}

// TestWithPgxClient runs pgx's own client authentication (cleartext, MD5
// and SCRAM-SHA-256, including its SASLprep) against Authenticate.
func TestWithPgxClient(t *testing.T) {
	const user, password = "alice", "s3cret"
	secrets := map[string]*Secret{
		"plain":    {Kind: SecretPlain, Plain: password},
		"md5":      mustParse(t, MD5Secret(user, password)),
		"scram":    mustParse(t, SCRAMSecret(password, 4096)),
		"postgres": mustParse(t, pgSCRAMSecret), // password "secret"
	}
	tests := []struct {
		method   Method
		secret   string
		password string
		wantCode string // "" = connected
		wantMsg  string
	}{
		{MethodPlain, "plain", password, "", ""},
		{MethodPlain, "md5", password, "", ""},
		{MethodPlain, "scram", password, "", ""},
		{MethodPlain, "scram", "nope", SQLStateInvalidPassword, MsgPasswordFailed},
		{MethodMD5, "plain", password, "", ""},
		{MethodMD5, "md5", password, "", ""},
		{MethodMD5, "md5", "nope", SQLStateInvalidPassword, MsgPasswordFailed},
		{MethodMD5, "scram", password, "", ""},
		{MethodMD5, "unknown", password, SQLStateInvalidPassword, MsgPasswordFailed},
		{MethodSCRAM, "plain", password, "", ""},
		{MethodSCRAM, "scram", password, "", ""},
		{MethodSCRAM, "postgres", "secret", "", ""},
		{MethodSCRAM, "postgres", "Secret", SQLStateInvalidPassword, MsgSASLFailed},
		{MethodSCRAM, "md5", password, SQLStateInvalidPassword, MsgSASLFailed},
		{MethodSCRAM, "unknown", password, SQLStateInvalidPassword, MsgSASLFailed},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s/%s", tt.method, tt.secret, tt.password), func(t *testing.T) {
			cfg, err := pgconn.ParseConfig(fmt.Sprintf("host=pooler.test port=6432 user=%s password=%s dbname=db sslmode=disable", user, tt.password))
			if err != nil {
				t.Fatal(err)
			}
			serverErr := make(chan error, 1)
			cfg.LookupFunc = func(context.Context, string) ([]string, error) { return []string{"127.0.0.1"}, nil }
			cfg.DialFunc = func(context.Context, string, string) (net.Conn, error) {
				client, server := net.Pipe()
				go func() {
					serverErr <- serveOne(server, tt.method, func(string) *Secret { return secrets[tt.secret] })
				}()
				return client, nil
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conn, err := pgconn.ConnectConfig(ctx, cfg)
			if conn != nil {
				conn.Close(ctx)
			}
			sErr := <-serverErr
			if tt.wantCode == "" {
				if err != nil || sErr != nil {
					t.Fatalf("connect: %v; server: %v", err, sErr)
				}
				return
			}
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != tt.wantCode || pgErr.Message != tt.wantMsg || pgErr.Severity != "FATAL" {
				t.Fatalf("connect error = %v, want FATAL %s %q", err, tt.wantCode, tt.wantMsg)
			}
			if sErr == nil {
				t.Errorf("server side succeeded")
			}
		})
	}
}

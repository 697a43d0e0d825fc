package throttle

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// connectError returns a real *pgconn.ConnectError without touching the
// network: the dialer fails.
func connectError(t *testing.T, dialErr error) error {
	t.Helper()
	cfg, err := pgconn.ParseConfig("host=127.0.0.1 port=5432 user=app dbname=app connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	cfg.DialFunc = func(context.Context, string, string) (net.Conn, error) { return nil, dialErr }
	cfg.Fallbacks = nil
	conn, err := pgconn.ConnectConfig(context.Background(), cfg)
	if err == nil {
		conn.Close(context.Background())
		t.Fatal("connect succeeded")
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); !ok {
		t.Fatalf("not a ConnectError: %T %v", err, err)
	}
	return err
}

func TestIsOverload(t *testing.T) {
	pg := func(code string) error { return &pgconn.PgError{Severity: "ERROR", Code: code} }
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"pooler shed 53000", pg("53000"), true},
		{"too many connections 53300", pg("53300"), true},
		{"cannot connect now 57P03", pg("57P03"), true},
		{"wrapped shed", fmt.Errorf("load user: %w", pg("53000")), true},
		{"local rejection", newRejectedError(Low, "default", 0.8, 0), true},
		{"wrapped local rejection", fmt.Errorf("handler: %w", newRejectedError(Low, "default", 0.8, 0)), true},
		{"unique violation", pg("23505"), false},
		{"syntax error", pg("42601"), false},
		{"serialization failure", pg("40001"), false},
		{"query canceled / statement_timeout", pg("57014"), false},
		{"out of memory (not in the set)", pg("53200"), false},
		{"no rows", pgx.ErrNoRows, false},
		{"plain error", errors.New("boom"), false},
		{"context canceled", context.Canceled, false},
		{"wrapped context canceled", fmt.Errorf("query: %w", context.Canceled), false},
		{"shed wins over canceled", errors.Join(context.Canceled, pg("53000")), true},
		{"deadline exceeded", context.DeadlineExceeded, true},
		{"wrapped deadline exceeded", fmt.Errorf("query: %w", context.DeadlineExceeded), true},
		{"socket deadline", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, true},
		{"dial refused", refused, true},
		{"connection reset mid-query", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, false},
		{"connect error", connectError(t, refused), true},
		{"connect error from a login refusal", connectError(t, errors.New("FATAL: too many clients")), true},
		{"connect error after the caller cancelled", connectError(t, context.Canceled), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := IsOverload(c.err); got != c.want {
				t.Fatalf("IsOverload(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}

// overloaded also reads the context the operation ran under.
func TestOverloadedUsesContext(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(live)
	cancel()
	expired, cancel2 := context.WithTimeout(live, -1)
	defer cancel2()
	shed := &pgconn.PgError{Code: "53000"}
	cancelCode := &pgconn.PgError{Code: "57014"}
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"live, success", live, nil, false},
		{"live, shed", live, shed, true},
		{"live, 57014", live, cancelCode, false},
		// pgx reports a cancel through a socket deadline; the caller gave up.
		{"cancelled, socket timeout", cancelled, &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, false},
		{"cancelled, shed", cancelled, shed, true},
		{"cancelled, success", cancelled, nil, false},
		// The caller's deadline passed: too slow, whatever pgx made of it.
		{"expired, 57014 from pgx's cancel request", expired, cancelCode, true},
		{"expired, success", expired, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := overloaded(c.ctx, c.err); got != c.want {
				t.Fatalf("overloaded = %v, want %v", got, c.want)
			}
		})
	}
}

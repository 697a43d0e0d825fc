package pooler

import (
	"testing"

	"github.com/pgturnstile/pgturnstile/wire"
)

// The texts are PgBouncer's; operators grep for them. Changing one is a
// compatibility break, so each is pinned here.
func TestErrorTexts(t *testing.T) {
	cases := []struct {
		code Code
		args []any
		want string
	}{
		{CodeMaxClientConn, nil, "no more connections allowed (max_client_conn)"},
		{CodeQueryWaitTimeout, nil, "query_wait_timeout"},
		{CodeUnsupportedStartupParam, []any{"foo"}, "unsupported startup parameter: foo"},
		{CodeNoSuchDatabase, []any{"nope"}, "no such database: nope"},
		{CodeServerLoginFailing, []any{"password authentication failed"}, "server login has been failing, cached error: password authentication failed (server_login_retry)"},
		{CodeStatementModeTxBlock, nil, "transaction blocks not allowed in statement pooling mode"},
		{CodeClientLoginTimeout, nil, "client_login_timeout"},
		{CodeIdleTransactionTimeout, nil, "idle transaction timeout"},
		{CodeServerCrashed, nil, "server conn crashed?"},
	}
	for _, c := range cases {
		e := newError(c.code, c.args...)
		if e.Message != c.want || e.SQLState != "08P01" || e.Severity != "FATAL" {
			t.Errorf("code %d: got %q %s %s, want %q 08P01 FATAL", c.code, e.Message, e.SQLState, e.Severity, c.want)
		}
	}
	for code := range codes {
		if newError(code).Message == "" {
			t.Errorf("code %d has no text", code)
		}
	}
}

func TestAppendError(t *testing.T) {
	b := appendError(nil, newError(CodeQueryWaitTimeout))
	if b[0] != 'E' {
		t.Fatalf("type %c", b[0])
	}
	f, err := wire.ParseErrorResponse(b[5:])
	if err != nil {
		t.Fatal(err)
	}
	if f.Code != "08P01" || f.Message != "query_wait_timeout" || f.Severity != "FATAL" {
		t.Fatalf("%+v", f)
	}
}

package pgerror

import (
	"testing"

	"github.com/pgturnstile/pgturnstile/wire"
)

// The texts are PgBouncer's (or Postgres's, or named after pgturnstile's own
// settings); operators grep for them. Changing one, or its severity or
// SQLSTATE, is a compatibility break, so every code is pinned here.
func TestErrorTexts(t *testing.T) {
	cases := []struct {
		code     Code
		args     []any
		severity string
		sqlstate string
		want     string
	}{
		{MaxClientConn, nil, "FATAL", "08P01", "no more connections allowed (max_client_conn)"},
		{QueryWaitTimeout, nil, "FATAL", "08P01", "query_wait_timeout"},
		{UnsupportedStartupParam, []any{"foo"}, "FATAL", "08P01", "unsupported startup parameter: foo"},
		{UnsupportedOptions, nil, "FATAL", "08P01", "unsupported options startup parameter: only '-c config=val' and '--config=val' are allowed"},
		{NoSuchDatabase, []any{"nope"}, "FATAL", "08P01", "no such database: nope"},
		{TrustFailed, nil, "FATAL", "08P01", `"trust" authentication failed`},
		{ShuttingDown, nil, "FATAL", "08P01", "pooler is shutting down"},
		{ServerShuttingDown, nil, "FATAL", "08P01", "server shutting down"},
		{ServerLoginFailing, []any{"password authentication failed"}, "FATAL", "08P01", "server login has been failing, cached error: password authentication failed (server_login_retry)"},
		{ServerLoginFailing, []any{"connect failed"}, "FATAL", "08P01", "server login has been failing, cached error: connect failed (server_login_retry)"},
		{ClientLoginTimeout, nil, "FATAL", "08P01", "client_login_timeout"},
		{ClientIdleTimeout, nil, "FATAL", "08P01", "client_idle_timeout"},
		{IdleTransactionTimeout, nil, "FATAL", "08P01", "idle transaction timeout"},
		{QueryTimeout, nil, "FATAL", "08P01", "query timeout"},
		{StatementModeTxBlock, nil, "FATAL", "08P01", "transaction blocks not allowed in statement pooling mode"},
		{OldProtocol, nil, "FATAL", "08P01", "old V2 protocol not supported"},
		{BadPacket, nil, "FATAL", "08P01", "bad packet header"},
		{PacketTooLarge, nil, "FATAL", "08P01", "max_packet_size exceeded"},
		{ServerCrashed, nil, "FATAL", "08P01", "server conn crashed?"},
		{NoUserName, nil, "FATAL", "08P01", "no username supplied"},
		{ServerConnectFailed, []any{"connect failed"}, "FATAL", "08P01", "server login failed: connect failed"},
		{PQExecDisallowed, nil, "FATAL", "08P01", "PQexec disallowed"},
		{SSLRequired, nil, "FATAL", "08P01", "SSL required"},
		{DatabaseDisabled, []any{"app"}, "FATAL", "08P01", `database "app" is disabled`},
		{Evicted, nil, "FATAL", "08P01", "evicted"},
		{UnknownPacket, nil, "FATAL", "08P01", "unknown pkt"},
		{ClientMessageTimeout, nil, "FATAL", "08P01", "client_message_timeout"},
		{HeldMessageBudget, nil, "FATAL", "53200", "out of memory for client messages (held_message_budget)"},
		{InvalidMessageLength, nil, "FATAL", "08P01", "invalid message length"},
		{UnsupportedOptionsParam, []any{"work_mem"}, "FATAL", "08P01", "unsupported startup parameter in options: work_mem"},
		{HBANoEntry, []any{"127.0.0.1", "app", "db1"}, "FATAL", "28000", `no pg_hba.conf entry for host "127.0.0.1", user "app", database "db1"`},
		{HBAMethodUnsupported, []any{"ldap"}, "FATAL", "28000", "auth method ldap is not supported"},
		{AuthTypeInvalid, []any{`auth_type "pam" is not supported yet`}, "FATAL", "28000", `auth_type "pam" is not supported yet`},
		{AuthQueryFailed, nil, "FATAL", "08P01", "authentication query failed"},
		{AuthDBDisabled, []any{"authdb"}, "FATAL", "08P01", `authentication database "authdb" is disabled`},
		{BouncerConfigError, nil, "FATAL", "08P01", "bouncer config error"},
		{CertAuthFailed, []any{"app"}, "FATAL", "28000", `certificate authentication failed for user "app"`},
		{ExpectedPassword, []any{byte('Q')}, "FATAL", "08P01", "expected password response, got message type 'Q'"},
		{AdminNotAllowed, nil, "FATAL", "08P01", "not allowed"},
		{LoginFailed, nil, "FATAL", "08P01", "login failed"},
		{CopyUnexpectedMessage, []any{byte('Q')}, "FATAL", "08P01", "unexpected message type 0x51 during COPY from stdin"},
		{HeldMessageTooLarge, nil, "ERROR", "54000", "Parse message too large to be prepared by the pooler (max_held_message_size)"},
		{StatementNameTooLong, nil, "ERROR", "54000", "prepared statement name too long"},
		{StatementBudget, nil, "ERROR", "53200", "out of memory for prepared statements (prepared_statement_budget)"},
		{StatementExists, nil, "ERROR", "08P01", "prepared statement name is already in use"},
		{StatementNotFound, nil, "ERROR", "08P01", "prepared statement did not exist"},
		{StatementDiscarded, []any{"s1"}, "ERROR", "26000", `prepared statement "s1" does not exist`},
		{StalePlan, nil, "ERROR", "0A000", "cached plan must not change result type"},
		{ViewsSearchPath, []any{"app"}, "FATAL", "0A000", "pgturnstile: cluster app runs through per-shard views; search_path cannot be set at login"},
		{ShardMapPending, []any{"app"}, "FATAL", "57P03", "no such database: app (no shard map from etcd yet)"},
		{QueryTimeoutWaiting, nil, "FATAL", "08P01", "query_timeout"},
		{TransactionTimeout, nil, "FATAL", "08P01", "transaction timeout"},
		{ConfigChanged, nil, "FATAL", "08P01", "database configuration changed"},
		{PeerAuthFailed, nil, "FATAL", "08P01", "unix socket login rejected"},
		{NoSuchUser, nil, "FATAL", "08P01", "no such user"},
		{MaxDBClientConns, nil, "FATAL", "08P01", "client connections exceeded (max_db_client_connections)"},
		{MaxUserClientConns, nil, "FATAL", "08P01", "client connections exceeded (max_user_client_connections)"},
	}
	pinned := map[Code]bool{}
	for _, c := range cases {
		pinned[c.code] = true
		e := New(c.code, c.args...)
		if e.Code != c.code || e.Message != c.want || e.SQLState != c.sqlstate || e.Severity != c.severity {
			t.Errorf("code %d: got %d %q %s %s, want %q %s %s", c.code, e.Code, e.Message, e.SQLState, e.Severity, c.want, c.sqlstate, c.severity)
		}
	}
	for code := range codes {
		if !pinned[code] {
			t.Errorf("code %d is not pinned here", code)
		}
	}
	for code := Code(1); code < codeLimit; code++ {
		if _, ok := codes[code]; !ok {
			t.Errorf("code %d has no entry in the table", code)
		}
	}
}

func TestAppendError(t *testing.T) {
	b := Append(nil, New(QueryWaitTimeout))
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

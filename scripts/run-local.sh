#!/usr/bin/env bash
# run-local.sh — `make run`: a throwaway PostgreSQL 15 with pgturnstile in
# front of it, for trying pgturnstile out on a fresh machine.
#
# It initdb's a cluster in a temp dir (as the postgres OS user when run as
# root, since PostgreSQL refuses to run as root), starts it on 127.0.0.1:15432
# (or the next free port below 32768) with its socket in the temp dir, prints
# the psql line to connect through pgturnstile, and runs pgturnstile with its
# embedded default config (127.0.0.1:6432, transaction pooling, every client
# logs in to Postgres as postgres). Ctrl-C stops both and removes the temp dir.
#
# Environment:
#   PG_BIN                 PostgreSQL binaries (default /usr/lib/postgresql/15/bin)
#   PGTURNSTILE_BIN        pooler binary (default bin/pgturnstile; `make build`)
#   PGTURNSTILE_PG_PORT    first port to try for PostgreSQL (default 15432)
#   PGTURNSTILE_RUN_PORT   listen on this port instead of 6432; the script then
#                          writes the equivalent pgbouncer.ini itself (the
#                          integration test uses this to avoid collisions)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
POOLER=${PGTURNSTILE_BIN:-bin/pgturnstile}
PG_PORT=${PGTURNSTILE_PG_PORT:-15432}
LISTEN_PORT=${PGTURNSTILE_RUN_PORT:-6432}

die() { echo "run-local: $*" >&2; exit 1; }

[[ -x "$PG_BIN/initdb" && -x "$PG_BIN/pg_ctl" ]] ||
	die "PostgreSQL 15 not found in $PG_BIN (install postgresql-15, or set PG_BIN)"
[[ -x "$POOLER" ]] || die "$POOLER not found; run 'make build' (or 'make run') first"
POOLER=$(cd "$(dirname "$POOLER")" && pwd)/$(basename "$POOLER")

# Run PostgreSQL tools as the postgres OS user when we are root.
# (From inside $TMP: the postgres user may not be able to read our cwd.)
as_pg() {
	if [[ $(id -u) -eq 0 ]]; then
		(cd "$TMP" && setpriv --reuid=postgres --regid=postgres --init-groups -- "$@")
	else
		(cd "$TMP" && "$@")
	fi
}
if [[ $(id -u) -eq 0 ]]; then
	id postgres >/dev/null 2>&1 || die "running as root needs a 'postgres' OS user to run PostgreSQL"
fi

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/pgturnstile-run.XXXXXX")
POOLER_PID=
PG_STARTED=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM HUP
	if [[ -n $POOLER_PID ]]; then
		kill -TERM "$POOLER_PID" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$POOLER_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$POOLER_PID" 2>/dev/null || true
		wait "$POOLER_PID" 2>/dev/null || true
	fi
	if [[ -n $PG_STARTED ]]; then
		as_pg "$PG_BIN/pg_ctl" -D "$TMP/data" -m fast -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$TMP"
	echo "run-local: stopped PostgreSQL and removed $TMP" >&2
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

chmod 755 "$TMP"
mkdir -m 700 "$TMP/data" "$TMP/sock"
if [[ $(id -u) -eq 0 ]]; then
	chown postgres: "$TMP/data" "$TMP/sock"
fi

echo "run-local: initdb in $TMP/data" >&2
as_pg "$PG_BIN/initdb" -D "$TMP/data" -U postgres -E UTF8 --no-locale --no-sync \
	--auth-local=trust --auth-host=trust >"$TMP/initdb.log" 2>&1 ||
	{ cat "$TMP/initdb.log" >&2; die "initdb failed"; }

while port_in_use "$PG_PORT" || [[ $PG_PORT -eq $LISTEN_PORT ]]; do
	PG_PORT=$((PG_PORT + 1))
	((PG_PORT < 32768)) || die "no free port for PostgreSQL below 32768"
done
port_in_use "$LISTEN_PORT" && die "127.0.0.1:$LISTEN_PORT is already in use (another pgbouncer?); set PGTURNSTILE_RUN_PORT"

echo "run-local: starting PostgreSQL 15 on 127.0.0.1:$PG_PORT" >&2
touch "$TMP/postgres.log"
[[ $(id -u) -eq 0 ]] && chown postgres: "$TMP/postgres.log"
PG_STARTED=1
as_pg "$PG_BIN/pg_ctl" -D "$TMP/data" -l "$TMP/postgres.log" -w -t 60 \
	-o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $TMP/sock -c fsync=off" start >/dev/null ||
	{ cat "$TMP/postgres.log" >&2; die "PostgreSQL did not start"; }

if [[ $LISTEN_PORT == 6432 ]]; then
	POOLER_ARGS=(--dev-backend="127.0.0.1:$PG_PORT")
else
	# The embedded default config, spelled out as a pgbouncer.ini.
	cat >"$TMP/pgbouncer.ini" <<EOF
[databases]
* = host=127.0.0.1 port=$PG_PORT user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $LISTEN_PORT
unix_socket_dir =
auth_type = any
pool_mode = transaction
default_pool_size = 20
max_client_conn = 200
EOF
	POOLER_ARGS=("$TMP/pgbouncer.ini")
fi

echo "run-local: pgturnstile on 127.0.0.1:$LISTEN_PORT -> PostgreSQL on 127.0.0.1:$PG_PORT; Ctrl-C stops both" >&2
echo "Connect with:"
echo "psql \"host=127.0.0.1 port=$LISTEN_PORT dbname=postgres user=postgres\""

# Not exec: the trap must outlive the pooler to stop PostgreSQL.
"$POOLER" "${POOLER_ARGS[@]}" &
POOLER_PID=$!
set +e
wait "$POOLER_PID"
rc=$?
set -e
POOLER_PID=
echo "run-local: pgturnstile exited with status $rc" >&2
exit "$rc"

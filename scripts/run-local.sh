#!/usr/bin/env bash
# run-local.sh — `make run`: a throwaway PostgreSQL 15 with pgturnstile in
# front of it, for trying pgturnstile out on a fresh machine.
#
# It initdb's a cluster in a temp dir (as the postgres OS user when run as
# root, since PostgreSQL refuses to run as root), starts it on 127.0.0.1:15432
# (or the next free port below 32768) with its socket in the temp dir, prints
# the psql lines to connect through pgturnstile (as an application, and to the
# admin console as user admin) and the metrics URL, and runs pgturnstile on
# $TMP/pgbouncer.ini, written from the embedded default config
# (cmd/pgturnstile/default.ini: 127.0.0.1:6432, transaction pooling, every
# client logs in to Postgres as postgres, admin_users = admin, metrics on
# 127.0.0.1:6490). Being a file, it can be edited and RELOADed. Ctrl-C stops
# both and removes the temp dir.
#
# Environment:
#   PG_BIN                 PostgreSQL binaries (default /usr/lib/postgresql/15/bin)
#   PGTURNSTILE_BIN        pooler binary (default bin/pgturnstile; `make build`)
#   PGTURNSTILE_PG_PORT    first port to try for PostgreSQL (default 15432)
#   PGTURNSTILE_RUN_PORT   listen on this port instead of 6432 (the
#                          integration test uses this to avoid collisions)
#   PGTURNSTILE_METRICS_PORT  first port to try for /metrics (default 6490)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
POOLER=${PGTURNSTILE_BIN:-bin/pgturnstile}
PG_PORT=${PGTURNSTILE_PG_PORT:-15432}
LISTEN_PORT=${PGTURNSTILE_RUN_PORT:-6432}
METRICS_PORT=${PGTURNSTILE_METRICS_PORT:-6490}

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
while port_in_use "$METRICS_PORT" || [[ $METRICS_PORT -eq $LISTEN_PORT || $METRICS_PORT -eq $PG_PORT ]]; do
	METRICS_PORT=$((METRICS_PORT + 1))
	((METRICS_PORT < 32768)) || die "no free port for /metrics below 32768"
done

echo "run-local: starting PostgreSQL 15 on 127.0.0.1:$PG_PORT" >&2
touch "$TMP/postgres.log"
[[ $(id -u) -eq 0 ]] && chown postgres: "$TMP/postgres.log"
PG_STARTED=1
as_pg "$PG_BIN/pg_ctl" -D "$TMP/data" -l "$TMP/postgres.log" -w -t 60 \
	-o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $TMP/sock -c fsync=off" start >/dev/null ||
	{ cat "$TMP/postgres.log" >&2; die "PostgreSQL did not start"; }

# The embedded default config as a file, so that it can be edited and
# RELOADed; only the ports change.
sed -e "s/@HOST@/127.0.0.1/; s/@PORT@/$PG_PORT/" \
	-e "s/^listen_port = .*/listen_port = $LISTEN_PORT/" \
	-e "s/^metrics_addr = .*/metrics_addr = 127.0.0.1:$METRICS_PORT/" \
	cmd/pgturnstile/default.ini >"$TMP/pgbouncer.ini"
# As PgBouncer, pgturnstile started as root switches to `user =` once its
# listeners are open (and refuses to run as root without it).
if [[ $(id -u) -eq 0 ]]; then
	echo "user = postgres" >>"$TMP/pgbouncer.ini"
fi

echo "run-local: pgturnstile on 127.0.0.1:$LISTEN_PORT -> PostgreSQL on 127.0.0.1:$PG_PORT; Ctrl-C stops both" >&2
echo "Connect with:"
echo "psql \"host=127.0.0.1 port=$LISTEN_PORT dbname=postgres user=postgres\""
echo "Admin console (SHOW POOLS, SET USER, RELOAD, ...):"
echo "psql \"host=127.0.0.1 port=$LISTEN_PORT dbname=pgbouncer user=admin\""
echo "Metrics:"
echo "curl http://127.0.0.1:$METRICS_PORT/metrics"
echo "Config (edit it, then RELOAD in the console):"
echo "$TMP/pgbouncer.ini"

# Not exec: the trap must outlive the pooler to stop PostgreSQL.
"$POOLER" "$TMP/pgbouncer.ini" &
POOLER_PID=$!
set +e
wait "$POOLER_PID"
rc=$?
set -e
POOLER_PID=
echo "run-local: pgturnstile exited with status $rc" >&2
exit "$rc"

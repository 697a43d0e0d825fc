#!/bin/sh
# run.sh of the bench-scale bundle (scripts/bench-scale-bundle.sh builds it):
# runs bin/benchscale with the bundle's own PostgreSQL, pgbench, PgBouncer
# and pgturnstile, on a Linux x86-64 machine with nothing installed.
# Arguments go to benchscale (-h lists them); its table goes into
# ./BENCHMARKS.md unless -out says otherwise.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
PATH="$PATH:/usr/sbin:/sbin"

need=$(cat "$here/GLIBC_NEEDED")
have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}') || true
if [ -z "$have" ]; then
	# No getconf: the dynamic loader says its version too.
	have=$(/lib64/ld-linux-x86-64.so.2 --version 2>/dev/null | head -1 | grep -o '[0-9][0-9]*\.[0-9][0-9]*\.\{0,1\}$' | sed 's/\.$//') || true
fi
if [ -z "$have" ]; then
	echo "run.sh: no glibc found (getconf GNU_LIBC_VERSION, /lib64/ld-linux-x86-64.so.2); the bundle needs glibc >= $need" >&2
	exit 1
fi
if [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" != "$need" ]; then
	echo "run.sh: glibc $have here; the bundle's binaries need glibc >= $need" >&2
	exit 1
fi

# PostgreSQL and PgBouncer refuse to run as root: benchscale runs them as
# the OS user postgres, which a bare machine may lack.
if [ "$(id -u)" = 0 ] && ! grep -q '^postgres:' /etc/passwd; then
	if ! { command -v useradd >/dev/null 2>&1 &&
		useradd --system --no-create-home --home-dir /nonexistent --shell /bin/false postgres; }; then
		# No (working) useradd: the two lines it would write.
		uid=70
		while grep -q "^[^:]*:[^:]*:$uid:" /etc/passwd || grep -q "^[^:]*:[^:]*:$uid:" /etc/group; do uid=$((uid + 1)); done
		echo "postgres:x:$uid:" >> /etc/group
		echo "postgres:x:$uid:$uid:PostgreSQL for bench-scale:/nonexistent:/bin/false" >> /etc/passwd
	fi
	echo "run.sh: created the OS user postgres" >&2
fi

# The postgres user must be able to reach and run the binaries, which a
# bundle unpacked under /root does not allow: run them from a copy in a
# fresh directory anyone may read, removed at the end.
stage=$(mktemp -d "${TMPDIR:-/tmp}/bench-scale-bundle.XXXXXX")
trap 'rm -rf "$stage"' EXIT INT TERM
cp -R "$here/bin" "$here/lib" "$here/pg" "$stage/"
chmod -R a+rX "$stage"
chmod 755 "$stage"

export LD_LIBRARY_PATH="$stage/lib"
pg="$stage/pg/lib/postgresql/15/bin"
"$stage/bin/benchscale" -pg-bin "$pg" -pgbench "$pg/pgbench" -pgbouncer "$stage/bin/pgbouncer" \
	-pgturnstile "$stage/bin/pgturnstile" -out "$PWD/BENCHMARKS.md" "$@"

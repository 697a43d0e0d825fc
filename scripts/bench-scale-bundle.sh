#!/bin/sh
# Builds the bench-scale bundle (make bench-scale-bundle; bench/README.md,
# "Scale with cores"): everything `make bench-scale` runs, for a bare Linux
# x86-64 machine with nothing installed and no network:
#
#   bin/benchscale, bin/pgturnstile (static), bin/pgbouncer
#   pg/lib/postgresql/15/bin/{postgres,initdb,pg_ctl,pgbench}
#   pg/lib/postgresql/15/lib/   the modules initdb loads (plpgsql,
#                               dict_snowball) and the encoding conversions
#   pg/share/postgresql/15/     initdb's share dir
#   lib/                        the shared libraries all of them need (ldd),
#                               glibc's own left out: they must match the
#                               target's dynamic loader
#   run.sh, GLIBC_NEEDED, README.txt
#
# PostgreSQL finds its share and lib dirs relative to its binary (Debian
# built it for /usr/lib/postgresql/15/bin and /usr/share/postgresql/15), so
# pg/ mirrors /usr. Binaries and libraries are stripped. Output:
# $DIR (default bin/bench-scale-bundle) and $DIR.tar.gz.
set -eu
GO=${GO:-go}
DIR=${DIR:-bin/bench-scale-bundle}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PGBOUNCER=${PGBOUNCER:-$(command -v pgbouncer || echo /usr/sbin/pgbouncer)}

[ "$(uname -m)" = x86_64 ] || { echo "bench-scale-bundle: built for x86-64 only" >&2; exit 1; }
[ -x "$PGBOUNCER" ] || { echo "bench-scale-bundle: no pgbouncer (apt-get install -y pgbouncer)" >&2; exit 1; }
[ -x "$PGBIN/postgres" ] || { echo "bench-scale-bundle: no PostgreSQL 15 in $PGBIN" >&2; exit 1; }
PKGLIB=$("$PGBIN/pg_config" --pkglibdir)
SHARE=$("$PGBIN/pg_config" --sharedir)
case "$PGBIN:$PKGLIB:$SHARE" in
/usr/lib/postgresql/15/bin:/usr/lib/postgresql/15/lib:/usr/share/postgresql/15) ;;
*) echo "bench-scale-bundle: expects Debian's layout of PostgreSQL 15 (bin, pkglibdir, sharedir under /usr), got $PGBIN, $PKGLIB, $SHARE" >&2; exit 1 ;;
esac

rm -rf "$DIR" "$DIR.tar.gz"
mkdir -p "$DIR/bin" "$DIR/lib" "$DIR/pg/lib/postgresql/15/bin" "$DIR/pg/lib/postgresql/15/lib" "$DIR/pg/share/postgresql"

CGO_ENABLED=0 $GO build -trimpath -ldflags '-s -w' -o "$DIR/bin/benchscale" ./bench/cmd/benchscale
CGO_ENABLED=0 $GO build -trimpath -ldflags "-s -w -X main.commit=$(git rev-parse HEAD 2>/dev/null)" -o "$DIR/bin/pgturnstile" ./cmd/pgturnstile
cp -L "$PGBOUNCER" "$DIR/bin/pgbouncer"
for b in postgres initdb pg_ctl pgbench; do cp -L "$PGBIN/$b" "$DIR/pg/lib/postgresql/15/bin/"; done
for m in plpgsql.so dict_snowball.so; do cp -L "$PKGLIB/$m" "$DIR/pg/lib/postgresql/15/lib/"; done
cp -L "$PKGLIB"/*_and_*.so "$DIR/pg/lib/postgresql/15/lib/"
cp -a "$SHARE" "$DIR/pg/share/postgresql/15"

# The libraries every ELF file above needs, glibc's own left out.
glibc='^(ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libresolv|libutil|libanl|libnsl|libnss_[a-z]+|libmvec|libcrypt)\.so'
for f in "$DIR/bin/pgbouncer" "$DIR"/pg/lib/postgresql/15/bin/* "$DIR"/pg/lib/postgresql/15/lib/*.so; do
	ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
	base=$(basename "$lib")
	if echo "$base" | grep -Eq "$glibc"; then continue; fi
	cp -L "$lib" "$DIR/lib/$base"
done
# A library missing here would make a binary fail only on the target.
for f in "$DIR/bin/pgbouncer" "$DIR"/pg/lib/postgresql/15/bin/*; do
	if LD_LIBRARY_PATH="$DIR/lib" ldd "$f" | grep -q 'not found'; then
		echo "bench-scale-bundle: $f: a library is missing" >&2; LD_LIBRARY_PATH="$DIR/lib" ldd "$f" >&2; exit 1
	fi
done
strip --strip-unneeded "$DIR/bin/pgbouncer" "$DIR"/pg/lib/postgresql/15/bin/* "$DIR"/pg/lib/postgresql/15/lib/*.so "$DIR"/lib/*.so* 2>/dev/null || true

# The newest glibc symbol version any of them needs: run.sh checks the
# target's glibc against it.
for f in "$DIR/bin/pgbouncer" "$DIR"/pg/lib/postgresql/15/bin/* "$DIR"/pg/lib/postgresql/15/lib/*.so "$DIR"/lib/*.so*; do
	objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' || true
done | sed 's/GLIBC_//' | sort -uV | tail -1 > "$DIR/GLIBC_NEEDED"

cp scripts/bench-scale-run.sh "$DIR/run.sh"
chmod 755 "$DIR/run.sh"
cat > "$DIR/README.txt" <<TXT
pgturnstile bench-scale bundle, built $(date -u +%Y-%m-%dT%H:%MZ) from commit $(git rev-parse --short HEAD 2>/dev/null)
on $(. /etc/os-release && echo "$PRETTY_NAME") ($(ldd --version | head -1)).

  tar xzf bench-scale-bundle.tar.gz && bench-scale-bundle/run.sh [benchscale flags]

Runs as root (PostgreSQL and PgBouncer then run as the OS user postgres,
created if missing) or as a user who may run them. Needs glibc >= $(cat "$DIR/GLIBC_NEEDED"),
Linux x86-64, sh, and nothing else. Writes its table into ./BENCHMARKS.md
(-out FILE to change it; make bench-scale-merge FROM=FILE copies it into
the repository's BENCHMARKS.md). -h lists the flags; -quick is a smoke test.
TXT
tar -C "$(dirname "$DIR")" -czf "$DIR.tar.gz" "$(basename "$DIR")"
du -sh "$DIR" "$DIR.tar.gz"

#!/usr/bin/env bash
# test-deps.sh — installs what the driver matrix (integration/drivers) needs
# beyond Go and PostgreSQL 15: psycopg 3 for /usr/bin/python3, pgjdbc, and
# node-postgres (pg, pg-cursor) into integration/drivers/node/node_modules;
# and promtool (Debian's prometheus package: about 22 MB to download, 330 MB
# installed with --no-install-recommends), which TestMetricsPassPromtool
# runs on a live /metrics; systemd-socket-activate (Debian's systemd
# package), under which TestSocketActivation starts the pooler; slapd and
# ldap-utils, for the LDAP authentication tests, which run their own slapd
# (the package is preseeded with slapd/no_configuration so that it creates
# no database and starts no system service); and libpam0g-dev, for the
# `-tags pam` build and its test; logrotate, whose -d run checks the
# shipped etc/pgturnstile.logrotate (TestLogrotateFile).
#
# Idempotent and quick when everything is there: it only installs what is
# missing and says what it did. Debian packages are installed with apt-get
# (as root, or through sudo when available); the node modules with `npm ci`
# from the committed package-lock.json.
#
# Environment:
#   TEST_DEPS_NO_APT=1   do not run apt-get; only report what is missing
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { echo "test-deps: $*"; }
die() { echo "test-deps: $*" >&2; exit 1; }

# --- Debian packages -------------------------------------------------------

# package → a file it installs that the tests use
declare -A probe=(
	[python3-psycopg]="/usr/lib/python3/dist-packages/psycopg/__init__.py"
	[libpostgresql-jdbc-java]="/usr/share/java/postgresql.jar"
	[prometheus]="/usr/bin/promtool"
	[systemd]="/usr/bin/systemd-socket-activate"
	[slapd]="/usr/sbin/slapd"
	[ldap-utils]="/usr/bin/ldapadd"
	[libpam0g-dev]="/usr/include/security/pam_appl.h"
	[logrotate]="/usr/sbin/logrotate"
)

missing=()
for pkg in python3-psycopg libpostgresql-jdbc-java prometheus systemd slapd ldap-utils libpam0g-dev logrotate; do
	if [[ -e "${probe[$pkg]}" ]] || dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$'; then
		say "$pkg: present"
	else
		missing+=("$pkg")
	fi
done

if ((${#missing[@]})); then
	[[ -z "${TEST_DEPS_NO_APT:-}" ]] || die "missing: ${missing[*]} (TEST_DEPS_NO_APT is set)"
	command -v apt-get >/dev/null || die "missing: ${missing[*]}, and no apt-get to install them"
	sudo=()
	if ((EUID != 0)); then
		command -v sudo >/dev/null || die "missing: ${missing[*]}; run as root or install sudo"
		sudo=(sudo)
	fi
	say "installing ${missing[*]} with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	# slapd: no database, no service; the tests start their own.
	if [[ " ${missing[*]} " == *" slapd "* ]]; then
		echo "slapd slapd/no_configuration boolean true" | "${sudo[@]}" debconf-set-selections
	fi
	# Try without refreshing the package lists first: on a warm machine they
	# are recent enough and the update is the slow part.
	if ! "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; then
		"${sudo[@]}" apt-get update -q
		"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
	fi
	say "installed ${missing[*]}"
	# The prometheus package is here for promtool only; on a host run by
	# systemd its postinst also starts the Prometheus server (port 9090).
	if [[ " ${missing[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null &&
		systemctl is-active --quiet prometheus 2>/dev/null; then
		"${sudo[@]}" systemctl disable --now prometheus >/dev/null 2>&1 &&
			say "stopped and disabled the prometheus service the package started (only promtool is used)"
	fi
fi

/usr/bin/python3 -c 'import psycopg' 2>/dev/null || die "/usr/bin/python3 cannot import psycopg after installing python3-psycopg"
[[ -r /usr/share/java/postgresql.jar ]] || die "/usr/share/java/postgresql.jar missing after installing libpostgresql-jdbc-java"
/usr/bin/promtool --version >/dev/null 2>&1 || die "/usr/bin/promtool does not run after installing prometheus"
[[ -x /usr/bin/systemd-socket-activate ]] || die "/usr/bin/systemd-socket-activate missing after installing systemd"
[[ -x /usr/sbin/slapd ]] || die "/usr/sbin/slapd missing after installing slapd"

# --- Runtimes the packages above do not bring --------------------------------

for tool in java javac node npm; do
	command -v "$tool" >/dev/null || die "$tool not found on PATH (install a JDK ≥ 11 and Node.js ≥ 18)"
done

# --- node-postgres ------------------------------------------------------------

nodedir=integration/drivers/node
if [[ -d "$nodedir/node_modules/pg" && -d "$nodedir/node_modules/pg-cursor" &&
	"$nodedir/node_modules/.package-lock.json" -nt "$nodedir/package-lock.json" ]]; then
	say "node modules in $nodedir: present"
else
	say "running npm ci in $nodedir"
	(cd "$nodedir" && npm ci --no-audit --no-fund --loglevel=error)
	say "installed node modules in $nodedir"
fi

say "all driver-matrix dependencies present"

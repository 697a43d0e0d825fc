#!/usr/bin/env bash
# fuzz.sh — `make fuzz`: run every fuzz target in the module, one after the
# other, for FUZZTIME each. Targets are found by grepping the test files for
# `func FuzzX(`, so a new one is included without editing anything.
#
# `go test` on its own already runs each target's seeds and its committed
# corpus (testdata/fuzz/FuzzX/); this script looks for new inputs. A failing
# input is written by `go test` to the package's testdata/fuzz/FuzzX/:
# commit it with the fix, so it stays a regression test.
#
# Usage: scripts/fuzz.sh [-l] [REGEXP]
#   REGEXP  only the targets whose name matches it (awk syntax)
#   -l      list the targets (package and name) instead of running them
#
# Environment:
#   FUZZTIME      time per target (default 60s; `go test -fuzztime` syntax,
#                 so 10000x means 10000 executions)
#   FUZZPARALLEL  fuzzing workers per target (default: go test's, GOMAXPROCS)
#   FUZZMINIMIZETIME  time spent shrinking each new input (default 5s). Go's
#                 default, 60s, lets one large interesting input (the
#                 example admission.toml seed) take a whole 60s run:
#                 FuzzParseAdmission made 3558 executions in 60s with it,
#                 130000 in 30s with 3s. A failing input is still saved,
#                 only shrunk less.
#   GO            go command (default go)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

FUZZTIME=${FUZZTIME:-60s}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-5s}
GO=${GO:-go}
list=
if [[ "${1:-}" == -l ]]; then
	list=1
	shift
fi
filter=${1:-.}
parallel=()
[[ -n "${FUZZPARALLEL:-}" ]] && parallel=(-parallel "$FUZZPARALLEL")

files=$(git ls-files --cached --others --exclude-standard '*_test.go' 2>/dev/null || find . -name '*_test.go' -not -path './.git/*')
# "dir name" per target, sorted so runs are in a stable order.
targets=$(grep -H -o '^func Fuzz[A-Za-z0-9_]*(' $files |
	sed -E 's#^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\($#\1 \2#; s#^([^/ ]*_test\.go):func (Fuzz[A-Za-z0-9_]*)\($#. \2#' |
	sort -u | awk -v re="$filter" '$2 ~ re')

[[ -n "$targets" ]] || { echo "fuzz: no target matches $filter" >&2; exit 1; }
if [[ -n "$list" ]]; then
	echo "$targets"
	exit 0
fi

failed=()
while read -r dir name; do
	pkg=./${dir#./}
	echo "== $pkg $name ($FUZZTIME)"
	if ! "$GO" test "$pkg" -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "${parallel[@]}"; then
		failed+=("$pkg $name")
	fi
done <<<"$targets"

if ((${#failed[@]})); then
	echo "fuzz: failed: ${failed[*]}" >&2
	exit 1
fi
echo "fuzz: $(wc -l <<<"$targets") targets passed"

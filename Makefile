# pgturnstile — build, run, test.
GO        ?= go
BIN       := bin/pgturnstile
PKGS      := ./...

# The commit -V reports (cmd/pgturnstile/version.go). Passed with -ldflags
# because the Go toolchain records none from a git worktree, with
# -buildvcs=false, or from a tarball; override with COMMIT=… there.
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null)
MODIFIED  ?= $(shell test -n "$$(git status --porcelain --untracked-files=no 2>/dev/null)" && echo true)
LDFLAGS   := -X main.commit=$(COMMIT) -X main.modified=$(MODIFIED)

.PHONY: all go-check build release run test test-loop test-deps build-pam test-pam unit integration vet staticcheck fuzz clean bench bench-hostile bench-scale bench-scale-bundle bench-scale-merge

all: build

# Without Go on PATH, say what to do (README, Prerequisites) rather than
# make's "go: No such file or directory".
GO_MIN := $(shell sed -n 's/^go //p' go.mod)
go-check:
	@command -v $(GO) >/dev/null || { \
		echo "make: $(GO) is not on PATH; pgturnstile needs Go $(GO_MIN) or later (go.mod)."; \
		echo "With Go in /usr/local/go: export PATH=/usr/local/go/bin:\$$PATH"; exit 1; }

build: go-check
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/pgturnstile

# A release binary: static (CGO_ENABLED=0, so it runs on any Linux and in
# the distroless image of the Dockerfile), no build paths (-trimpath), no
# symbol table or DWARF (-s -w; panics still print their stacks). The
# release number is Version in cmd/pgturnstile/main.go; -V prints it with
# the commit and the Go version. GOOS=… GOARCH=… make release cross-builds.
RELEASE_BIN ?= bin/release/pgturnstile
release: go-check
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $(RELEASE_BIN) ./cmd/pgturnstile
	@if command -v ldd >/dev/null && ldd $(RELEASE_BIN) >/dev/null 2>&1; then \
		echo "release: $(RELEASE_BIN) is dynamically linked"; exit 1; fi
	@# Only a binary for this machine can run here.
	@[ "$$($(GO) env GOOS GOARCH)" != "$$($(GO) env GOHOSTOS GOHOSTARCH)" ] || $(RELEASE_BIN) -V

# First README command: a throwaway PostgreSQL 15 and pgturnstile in front of it.
run: build
	scripts/run-local.sh

# Second README command: static checks, unit tests and integration tests
# (the integration tests start their own PostgreSQL and the real binary).
# -p 1: one package at a time, so the driver matrix does not load the
# machine while the integration tests measure admission control under
# overload (their thresholds are the issue's, on a 2-core machine).
test: build vet staticcheck test-deps
	$(GO) test -race -shuffle=on -count=1 -p 1 -timeout 25m $(PKGS)
	$(MAKE) test-loop
	$(MAKE) test-pam

# The tests that start the pooler (the integration tests, the drivers, the
# pooler's and the binary's own) again with the event-loop engine
# (event_loop = 1, issue 35) as the default, so that both engines are
# tested whole (a test's own event_loop line still wins). The tests of
# sharded clusters are left out of this pass: a sharded cluster's clients
# never rest on the loop (client.loopable), so under event_loop = 1 they
# run the goroutine engine's code, which the pass above ran (about 260 of
# the integration tests' 620 s).
test-loop: build test-deps
	PGTURNSTILE_EVENT_LOOP_DEFAULT=1 $(GO) test -race -shuffle=on -count=1 -p 1 -timeout 25m \
		-skip '^TestShard' ./pooler/... ./cmd/... ./integration/...

# auth_type = pam lives behind the build tag pam (cgo and libpam0g-dev, which
# test-deps installs): the default and release builds stay cgo-free.
build-pam: go-check
	$(GO) build -tags pam -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/pgturnstile
test-pam: go-check
	$(GO) vet -tags pam ./auth ./pooler
	$(GO) test -tags pam -count=1 ./auth -run PAM

# The driver matrix needs psycopg, pgjdbc and node-postgres; installs what
# is missing (apt-get, npm ci) and is quick when all is there.
test-deps:
	scripts/test-deps.sh

unit: go-check
	$(GO) test -race -short -count=1 $(PKGS)

vet: go-check
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet $(PKGS)
	@# Builds beyond Linux: OS-specific socket code lives in internal/netpoll
	@# (Linux, plus a fallback where parking is off); the integration tests
	@# and bench tools are Linux-only (build tag linux).
	GOOS=darwin $(GO) build $(PKGS)
	GOOS=windows $(GO) vet $(PKGS)

staticcheck: go-check
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)

# Every fuzz target in the module (scripts/fuzz.sh finds them), one after
# the other, FUZZTIME each (60s: a little over a minute per target). Plain
# `go test` already runs their seeds and committed corpora (testdata/fuzz/).
# Only some: make fuzz FUZZ='FuzzReader|FuzzParseHBA' FUZZTIME=10s.
FUZZTIME ?= 60s
FUZZ     ?= .
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/fuzz.sh '$(FUZZ)'

# Benchmarks side by side with PgBouncer and direct PostgreSQL (bench/README.md).
# `make bench` writes BENCHMARKS.md (about 26 minutes on 2 cores);
# `make bench QUICK=1` is a smoke test (about 6) that writes bench/BENCHMARKS.quick.md.
# `make bench AA=1` is the A/A run: PgBouncer against itself on the target
# workloads (about 5 minutes), the machine's noise floor, in bench/NOISE-FLOOR.md.
# Extra flags: make bench BENCHFLAGS='-only S-ext-100 -pprof 127.0.0.1:6060'.
BENCH_OUT := $(if $(filter 1 yes true,$(AA)),-aa -out bench/NOISE-FLOOR.md,$(if $(filter 1 yes true,$(QUICK)),-quick -out bench/BENCHMARKS.quick.md,-out BENCHMARKS.md))
bench: build
	$(GO) build -o bin/pgbench-compare ./bench/cmd/pgbench-compare
	$(GO) build -o bin/loginfloor ./bench/cmd/loginfloor
	bin/pgbench-compare $(BENCH_OUT) $(BENCHFLAGS)

# Pooler memory when one client streams a 200 MiB message (Parse, Describe,
# Close, console query), pgturnstile beside PgBouncer; about 2 minutes;
# writes bench/HOSTILE-MEMORY.md (bench/README.md).
bench-hostile: build
	$(GO) build -o bin/hostilemem ./bench/cmd/hostilemem
	bin/hostilemem -out bench/HOSTILE-MEMORY.md $(BENCHFLAGS)

# Scale with cores (issue 35; bench/README.md, "Scale with cores"):
# pgturnstile with GOMAXPROCS=N, one PgBouncer and N PgBouncers on
# so_reuseport at N = 1, 2, 4, … up to this machine's CPUs, each pinned to
# N cores; select-only at 1/40/120/500 clients (10,000 from 8 CPUs up, or
# with BENCHFLAGS='-clients 1,40,120,500,10000'), SCRAM login per
# transaction, TLS; 40 server connections. About 10 minutes on 2 cores.
# Writes this machine's table into BENCHMARKS.md's bench-scale section,
# keeping other machines' tables; `make bench-scale QUICK=1` (about 2
# minutes) writes bench/BENCHMARKS-SCALE.quick.md instead.
# `make bench-scale-bundle` builds bin/bench-scale-bundle.tar.gz: the same
# run with its own PostgreSQL 15, pgbench, PgBouncer and pgturnstile, for a
# Linux x86-64 machine with nothing installed and no network
# (tar xzf …; bench-scale-bundle/run.sh). `make bench-scale-merge
# FROM=file` copies the tables of such a run into BENCHMARKS.md.
BENCH_SCALE_OUT := $(if $(filter 1 yes true,$(QUICK)),-quick -out bench/BENCHMARKS-SCALE.quick.md,-out BENCHMARKS.md)
bench-scale: build
	@command -v pgbouncer >/dev/null || test -x /usr/sbin/pgbouncer || DEBIAN_FRONTEND=noninteractive apt-get install -y pgbouncer
	$(GO) build -o bin/benchscale ./bench/cmd/benchscale
	bin/benchscale $(BENCH_SCALE_OUT) $(BENCHFLAGS)

bench-scale-bundle: go-check
	@command -v pgbouncer >/dev/null || test -x /usr/sbin/pgbouncer || DEBIAN_FRONTEND=noninteractive apt-get install -y pgbouncer
	GO=$(GO) scripts/bench-scale-bundle.sh

bench-scale-merge: go-check
	@test -n "$(FROM)" || { echo "make bench-scale-merge FROM=path/to/BENCHMARKS.md (a bundle run's)"; exit 1; }
	$(GO) build -o bin/benchscale ./bench/cmd/benchscale
	bin/benchscale -merge $(FROM) -out BENCHMARKS.md

clean:
	rm -rf bin

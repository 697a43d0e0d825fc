# pgturnstile in a container: a static binary on distroless, as a non-root
# user, reading the PgBouncer configuration mounted at /etc/pgbouncer.
#
#   docker build --build-arg COMMIT=$(git rev-parse HEAD) -t pgturnstile .
#   docker run -d --name pgturnstile -p 6432:6432 -p 6490:6490 \
#     -v /etc/pgbouncer:/etc/pgbouncer:ro pgturnstile
#
# The container's pgbouncer.ini needs listen_addr = * (or 0.0.0.0) and, for
# /metrics, metrics_addr = 0.0.0.0:6490. Debian's pgbouncer.ini puts the
# logfile, pidfile and Unix socket under /var/log/postgresql and
# /var/run/postgresql, which do not exist here: leave logfile and pidfile
# empty (logs go to stderr, docker logs) and set unix_socket_dir = /tmp or
# empty, or mount writable directories there. The files must be readable
# by uid 65532. Other arguments replace the default command:
# docker run … pgturnstile -V.

# The Go release of go.mod's go line.
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The commit -V reports (.git is not in the build context).
ARG COMMIT=
# As `make release`: static (CGO_ENABLED=0, nothing to link at run time
# in a distroless image), no build paths, no symbol table.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.commit=${COMMIT}" \
      -o /out/pgturnstile ./cmd/pgturnstile \
 && /out/pgturnstile -V

# distroless/static: CA certificates, tzdata, /etc/passwd with nonroot
# (65532) and a /tmp for the default unix_socket_dir; no shell.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/pgturnstile /usr/local/bin/pgturnstile
COPY LICENSE /usr/share/doc/pgturnstile/LICENSE
USER 65532:65532
# The client port (listen_port) and /metrics (metrics_addr).
EXPOSE 6432 6490
# docker stop: SIGINT finishes the transactions in flight, then exits
# (SHUTDOWN WAIT_FOR_SERVERS), as the systemd unit's KillSignal; SIGTERM
# would wait for every client to disconnect.
STOPSIGNAL SIGINT
ENTRYPOINT ["/usr/local/bin/pgturnstile"]
CMD ["/etc/pgbouncer/pgbouncer.ini"]

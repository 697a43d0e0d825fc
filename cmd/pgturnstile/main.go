// Command pgturnstile is a PostgreSQL connection pooler that reads
// PgBouncer's pgbouncer.ini and userlist.txt unchanged.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/errtext"
	"github.com/pgturnstile/pgturnstile/internal/procscale"
	"github.com/pgturnstile/pgturnstile/internal/takeover"
	"github.com/pgturnstile/pgturnstile/pooler"
)

// Version is the pgturnstile release.
const Version = "0.1.0"

// versionLine is both SHOW VERSION's answer and the first line of
// --version, as in PgBouncer (its suite compares the two). Monitoring
// (pgbouncer_exporter) parses "PgBouncer x.y.z" from SHOW VERSION to
// decide which columns to expect, so it names the PgBouncer level we match.
const versionLine = "PgBouncer 1.25.0 (pgturnstile " + Version + ")"

//go:embed default.ini
var defaultConfig string

const usage = `pgturnstile is a PostgreSQL connection pooler, a drop-in replacement for PgBouncer.

Usage:
  pgturnstile [OPTION]... CONFIG_FILE
  pgturnstile --dev-backend=HOST:PORT
  pgturnstile shard views [OPTION]... SHARD_FILE   (docs/sharding.md)
  pgturnstile shard publish [OPTION]... SHARD_FILE (the map in etcd)
  pgturnstile shard status [OPTION]...

Options:
  -d, --daemon           run in background (as a daemon); needs pidfile,
                         and logfile or syslog
  -q, --quiet            run quietly (no log to stderr)
  -R, --reboot           online restart: take over the listening sockets
                         and the clients of the running process (through
                         its Unix socket), which then exits; starts
                         normally if none runs
  -v, --verbose          increase verbosity, added to the verbose setting:
                         -v logs DEBUG lines (startup parameters, logins,
                         server logins launched, the SETs that align a
                         server's parameters with its client's), -vv
                         NOISE lines too (each server assignment)
  -u, --user=USERNAME    switch to USERNAME after opening the listeners
  -V, --version          show version, then exit
  -h, --help             show this help, then exit
      --dev-backend=HOST:PORT
                         run the embedded default config (127.0.0.1:6432,
                         any user, transaction pooling) in front of the
                         PostgreSQL at HOST:PORT; for trying pgturnstile out
`

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "shard" {
		return runShard(args[1:], os.Stdout, stderr)
	}
	fs := flag.NewFlagSet("pgturnstile", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var daemon, quiet, version, help, reboot bool
	var user, devBackend string
	verbose := 0
	for _, n := range []string{"d", "daemon"} {
		fs.BoolVar(&daemon, n, false, "")
	}
	for _, n := range []string{"R", "reboot"} {
		fs.BoolVar(&reboot, n, false, "")
	}
	for _, n := range []string{"q", "quiet"} {
		fs.BoolVar(&quiet, n, false, "")
	}
	for _, n := range []string{"V", "version"} {
		fs.BoolVar(&version, n, false, "")
	}
	for _, n := range []string{"h", "help"} {
		fs.BoolVar(&help, n, false, "")
	}
	for _, n := range []string{"u", "user"} {
		fs.StringVar(&user, n, "", "")
	}
	for _, n := range []string{"v", "verbose"} {
		fs.Func(n, "", func(string) error { verbose++; return nil })
	}
	fs.StringVar(&devBackend, "dev-backend", "", "")
	// -v takes no value; make the flag package treat it as boolean.
	args = expandVerbose(args, &verbose)
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "pgturnstile: %v\n\n%s", err, usage)
		return 1
	}
	// Sockets systemd passed (socket activation), taken before any file
	// is opened; served instead of binding (activation.go).
	act := takeActivation()
	switch {
	case help:
		fmt.Fprint(os.Stdout, usage)
		return 0
	case version:
		printVersion(os.Stdout)
		return 0
	}

	var cfg *config.Config
	var err error
	switch {
	case devBackend != "":
		if fs.NArg() != 0 {
			fmt.Fprintln(stderr, "pgturnstile: --dev-backend takes no config file")
			return 1
		}
		cfg, err = devConfig(devBackend)
	case fs.NArg() == 1:
		cfg, err = config.Load(fs.Arg(0))
	default:
		fmt.Fprint(stderr, usage)
		return 1
	}
	if err != nil {
		// config.Load says "cannot load config file" itself when the file
		// cannot be read; a parse error gets it here.
		msg := err.Error()
		if !strings.HasPrefix(msg, "cannot load config file: ") {
			msg = "cannot load config file: " + msg
		}
		fmt.Fprintf(stderr, "pgturnstile: %s\n", errtext.Line(msg))
		return 1
	}

	logCreated := logfileMissing(cfg.Settings.Logfile)
	logOut, err := newLogOutput(cfg.Settings.Logfile, stderrUnless(quiet, stderr))
	if err != nil {
		fmt.Fprintf(stderr, "pgturnstile: %v\n", err)
		return 1
	}
	defer logOut.Close()
	handler := newHandler(logOut, verbose+cfg.Settings.Verbose)
	handler.setFormat(func() string { return cfg.Settings.LogFormat })
	log, syslogOut := withSyslog(slog.New(handler), &cfg.Settings)
	defer syslogOut.Close()
	inherited, err := act.listeners(&cfg.Settings, log, daemon)
	if err != nil {
		fatal(log, err.Error())
		return 1
	}
	// PgBouncer's guards (syslog.go, startup.go): root, socket, pidfile, -d.
	if reboot && inherited != nil {
		// The sockets are systemd's: an online restart would take
		// over other ones (PgBouncer's rule and words).
		fatal(log, "cannot reboot under service manager")
		return 1
	}
	start, code := beforeListen(cfg, user, daemon, reboot, logCreated, inherited != nil, log, stderr)
	if code >= 0 {
		return code
	}
	defer start.exit()
	opts := []pooler.Option{pooler.WithVersion(versionLine), pooler.WithVerbose(verbose),
		pooler.WithReloadHook(func(st *config.Settings) { reopenLogs(log, logOut, syslogOut, st) }),
		// An online restart took over from us: the pidfile is its now.
		pooler.WithHandOverHook(start.exit)}
	// An online restart's handover: until start.commitTakeover, every
	// failure gives it up, and the old process goes on serving.
	var handover *takeover.Handover
	if reboot {
		h, ok := start.takeOver()
		if !ok {
			return 1
		}
		if h != nil {
			handover = h
			opts = append(opts, pooler.WithHandover(h))
			defer func() {
				if handover != nil {
					handover.Abort()
					log.Info("takeover given up: the old process goes on")
				}
			}()
		}
	}

	if inherited != nil {
		opts = append(opts, pooler.WithListeners(inherited))
	}
	svc, err := pooler.New(cfg, log, opts...)
	if errors.Is(err, takeover.ErrRefused) {
		fatal(log, err.Error())
		return 1
	}
	if err != nil {
		log.Error("startup failed: " + err.Error())
		return 1
	}
	handler.setVerbose(svc.Verbose)
	handler.setFormat(func() string { return svc.Settings().LogFormat })
	// Caught from before the listeners open, and kept until handleSignals
	// runs: a SIGHUP sent as soon as the port answers (a reload right
	// after the start) must not end the process, as an uncaught one does.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, handledSignals...)
	if err := svc.Listen(); err != nil {
		log.Error("cannot listen: " + err.Error())
		return 1
	}
	var metricsLn net.Listener
	if addr := cfg.Settings.MetricsAddr; addr != "" {
		ln, how := handedMetrics(handover, addr), " (inherited)"
		if ln == nil {
			ln, how = nil, ""
			if ln, err = net.Listen("tcp", addr); err != nil {
				log.Error("cannot listen for metrics: " + err.Error())
				return 1
			}
		}
		metricsLn = ln
		log.Info("metrics listening on " + ln.Addr().String() + how)
	}
	if handover != nil {
		if handover.Metrics != nil && handover.Metrics != metricsLn {
			handover.Metrics.Close() // metrics_addr changed, or is off
		}
		if !start.commitTakeover(handover) {
			return 1
		}
		handover = nil // committed: nothing to give back
	}
	if metricsLn != nil {
		svc.ServeMetrics(metricsLn)
	}
	if addr := os.Getenv("PGTURNSTILE_PPROF"); addr != "" {
		// Profiling endpoint for benchmarks and debugging; off unless asked.
		// PGTURNSTILE_MEMPROFILE_RATE=1 records every allocation, for
		// exact per-client memory figures.
		if n, err := strconv.Atoi(os.Getenv("PGTURNSTILE_MEMPROFILE_RATE")); err == nil && n > 0 {
			runtime.MemProfileRate = n
		}
		go http.ListenAndServe(addr, nil)
	}
	// The user switch and the pidfile, once every listener is open.
	if !start.afterListen() {
		return 1
	}
	// shard_source = etcd: the map is watched from now on; what was
	// published is in force before Serve if etcd answers (etcd.go).
	shardSource, err := startShardSource(cfg, svc, log)
	if err != nil {
		log.Error("startup failed: " + err.Error())
		return 1
	}
	if shardSource != nil {
		defer shardSource.Close()
	}
	log.Info("process up: pgturnstile " + Version + ", pid " + strconv.Itoa(os.Getpid()))

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	notify := newNotifier()
	// One P while the load is light, all of them when it is not
	// (internal/procscale says why); off where GOMAXPROCS is set.
	go procscale.Run(ctx, procscale.Interval, func(from, to int, s procscale.Sample) {
		log.Debug(fmt.Sprintf("GOMAXPROCS %d -> %d (%.2f CPUs used, %d of %d sampled waits for a P over %v)",
			from, to, s.Used, s.SlowWaits, s.Waits, procscale.SlowWait))
	})
	go handleSignals(ctx, sigs, svc, log, notify, devBackend != "", stop)
	// Listeners are open but nothing is accepted before Serve: warm the
	// forced-user pools to min_pool_size first, so the first clients find
	// servers ready.
	svc.Warm(ctx)
	// Tell systemd (Type=notify) we are ready.
	notify.send("READY=1\nSTATUS=accepting connections")
	if err := svc.Serve(ctx); err != nil {
		notify.send("STOPPING=1")
		log.Error("serve: " + err.Error())
		return 1
	}
	notify.send("STOPPING=1")
	log.Info("shutdown complete")
	return 0
}

// handleSignals maps signals to console actions as PgBouncer 1.23+ does:
// SIGHUP reload; SIGINT = SHUTDOWN WAIT_FOR_SERVERS; SIGTERM = SHUTDOWN
// WAIT_FOR_CLIENTS; a second SIGINT/SIGTERM, or SIGQUIT, = immediate
// shutdown; SIGUSR1 = PAUSE; SIGUSR2 = RESUME. ctx is the process's: a
// graceful shutdown waits until it ends (stop, on a second signal).
func handleSignals(ctx context.Context, sigs <-chan os.Signal, svc *pooler.Service, log *slog.Logger, notify *notifier, embedded bool, stop func()) {
	shuttingDown := false
	for sig := range sigs {
		switch sig {
		case syscall.SIGHUP:
			if embedded {
				continue
			}
			notify.send(reloadingMessage())
			// PgBouncer's phrase, logged once the new config is in force
			// (a failure is logged by Reload as "RELOAD failed: …").
			if svc.Console().Reload() == nil {
				log.Info("got SIGHUP, re-reading config")
			}
			notify.send("READY=1")
		case sigPause:
			log.Info("got SIGUSR1, pausing all activity")
			// The pause is in force before the next signal is read
			// (a SIGUSR2 right after it resumes); only the wait for
			// the servers in use runs apart.
			wait := svc.PauseAll()
			go wait()
		case sigResume:
			if shuttingDown || svc.ShuttingDown() {
				// A console SHUTDOWN counts too: RESUME would undo
				// its pause (PgBouncer's words).
				log.Info("got SIGUSR2 while shutting down, ignoring")
				continue
			}
			log.Info("got SIGUSR2, resuming all activity")
			svc.Console().Resume("")
		case syscall.SIGQUIT:
			log.Info("got SIGQUIT, fast exit")
			notify.send("STOPPING=1")
			stop()
		case syscall.SIGINT, syscall.SIGTERM:
			if shuttingDown || svc.ShuttingDown() {
				// A second signal, or one after a console SHUTDOWN
				// WAIT_FOR_*: PgBouncer's fast exit, in its words.
				log.Info("got " + signalName(sig) + " while shutting down, fast exit")
				stop()
				continue
			}
			shuttingDown = true
			notify.send("STOPPING=1")
			if sig == syscall.SIGINT {
				log.Info("got SIGINT, shutting down, waiting for servers")
				svc.Shutdown(ctx, admin.ShutdownWaitForServers)
			} else {
				log.Info("got SIGTERM, shutting down, waiting for clients")
				svc.Shutdown(ctx, admin.ShutdownWaitForClients)
			}
		}
	}
}

// handedMetrics is the metrics listener an online restart handed over,
// if it listens on addr (metrics_addr); nil otherwise.
func handedMetrics(h *takeover.Handover, addr string) net.Listener {
	if h == nil || h.Metrics == nil {
		return nil
	}
	want, err := net.ResolveTCPAddr("tcp", addr)
	got, ok := h.Metrics.Addr().(*net.TCPAddr)
	if err != nil || !ok || want.Port != got.Port {
		return nil
	}
	if len(want.IP) == 0 || want.IP.IsUnspecified() {
		if !got.IP.IsUnspecified() {
			return nil
		}
	} else if !want.IP.Equal(got.IP) {
		return nil
	}
	return h.Metrics
}

// signalName is the signal as PgBouncer's log lines name it.
func signalName(sig os.Signal) string {
	if sig == syscall.SIGINT {
		return "SIGINT"
	}
	return "SIGTERM"
}

// expandVerbose turns -vv… into repeated -v so the flag package accepts it.
func expandVerbose(args []string, verbose *int) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		if len(a) > 2 && a[0] == '-' && a[1] == 'v' && strings.Trim(a[1:], "v") == "" {
			*verbose += len(a) - 1
			continue
		}
		if a == "-v" || a == "--verbose" {
			*verbose++
			continue
		}
		out = append(out, a)
	}
	return out
}

// devConfig is the embedded default config in front of HOST:PORT.
func devConfig(backend string) (*config.Config, error) {
	i := strings.LastIndexByte(backend, ':')
	if i < 0 {
		return nil, errors.New("--dev-backend must be HOST:PORT")
	}
	host, port := backend[:i], backend[i+1:]
	if _, err := strconv.Atoi(port); err != nil {
		return nil, fmt.Errorf("--dev-backend: bad port %q", port)
	}
	text := strings.NewReplacer("@HOST@", host, "@PORT@", port).Replace(defaultConfig)
	return config.Parse("default.ini", []byte(text))
}

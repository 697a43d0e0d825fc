package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// The commit the binary was built from. The Makefile sets both with
// -ldflags "-X main.commit=… -X main.modified=true" (`make build`,
// `make release`), since the Go toolchain records no VCS information in
// some checkouts (git worktrees, -buildvcs=false, source tarballs with no
// .git). Left empty, the build info's vcs.revision is used.
var (
	commit   string
	modified string // "true" when the working tree had uncommitted changes
)

// printVersion is --version's output, in PgBouncer's shape: the first line
// is exactly what SHOW VERSION answers (PgBouncer's suite compares the two,
// and pgbouncer_exporter parses "PgBouncer x.y.z" from it), then one
// "name: value" line per component, as PgBouncer's libevent/adns/tls lines.
func printVersion(w io.Writer) {
	fmt.Fprintf(w, "%s\ncommit: %s\ngo: %s %s/%s\n",
		versionLine, buildCommit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// buildCommit is the commit from the ldflags, else from the build info,
// with " (modified)" when the tree had uncommitted changes; "unknown" when
// neither knows.
func buildCommit() string {
	rev, dirty := commit, modified == "true"
	if rev == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					dirty = s.Value == "true"
				}
			}
		}
	}
	switch {
	case rev == "":
		return "unknown"
	case dirty:
		return rev + " (modified)"
	}
	return rev
}

//go:build noetcd

package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/pooler"
)

// Built with -tags noetcd: no etcd client in the binary. shard_source =
// etcd is refused at start, and the etcd subcommands say why.

var errNoEtcd = errors.New("shard_source = etcd: this pgturnstile was built without etcd (-tags noetcd)")

func startShardSource(cfg *config.Config, _ *pooler.Service, _ *slog.Logger) (io.Closer, error) {
	if cfg.Settings.ShardSource == "etcd" {
		return nil, errNoEtcd
	}
	return nil, nil
}

func runShardEtcd(verb string, _ []string, _, stderr io.Writer) int {
	fmt.Fprintf(stderr, "pgturnstile shard %s: %v\n", verb, errNoEtcd)
	return 1
}

func newEtcdFleet(*etcdFlags, io.Writer) (moveFleet, error) { return nil, errNoEtcd }

// Package etcdtest runs a real etcd server in the test's process (etcd's
// embed package) for the tests of shard_source = etcd: a one-member
// cluster on 127.0.0.1, its data in a temporary directory, which can be
// stopped and started again on the same ports and data. Only tests import
// it, so the pooler's binary links etcd's client alone.
package etcdtest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Server is one embedded etcd member.
type Server struct {
	t                    testing.TB
	dir                  string
	clientPort, peerPort int
	e                    *embed.Etcd
}

// Start starts an etcd member; the test's cleanup stops it.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, dir: t.TempDir()}
	s.clientPort, s.peerPort = freePort(t), freePort(t)
	for s.peerPort == s.clientPort {
		s.peerPort = freePort(t)
	}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// freePort picks a port below the Linux ephemeral range (32768 and up),
// so that no outgoing connection takes it between a Stop and a Restart.
func freePort(t testing.TB) int {
	t.Helper()
	for range 200 {
		port := 20000 + rand.IntN(12000)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			ln.Close()
			return port
		}
	}
	t.Fatal("etcdtest: no free port in 20000-31999")
	return 0
}

// Endpoint is the member's client URL.
func (s *Server) Endpoint() string { return fmt.Sprintf("http://127.0.0.1:%d", s.clientPort) }

// Stop stops the member (its data stays for Restart); stopping a stopped
// one does nothing.
func (s *Server) Stop() {
	if s.e == nil {
		return
	}
	s.e.Close()
	<-s.e.Server.StopNotify()
	s.e = nil
}

// Restart starts the member on its ports and data; it must be stopped.
func (s *Server) Restart() {
	s.t.Helper()
	if s.e != nil {
		s.t.Fatal("etcdtest: Restart of a running member")
	}
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = s.dir
	cu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", s.clientPort)}
	pu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", s.peerPort)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// Its logs (errors at each Stop included) would drown the test's.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true // a test's data need not survive the machine
	var err error
	// A port just closed may take a moment to be free again.
	for try := 0; try < 20; try++ {
		var e *embed.Etcd
		if e, err = embed.StartEtcd(cfg); err == nil {
			select {
			case <-e.Server.ReadyNotify():
				s.e = e
				return
			case <-time.After(30 * time.Second):
				e.Close()
				s.t.Fatal("etcdtest: etcd did not become ready in 30 s")
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("etcdtest: cannot start etcd: %v", err)
}

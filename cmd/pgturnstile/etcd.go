//go:build !noetcd

package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/pooler"
	"github.com/pgturnstile/pgturnstile/shard/etcdsource"
)

// The shard map in etcd (shard_source = etcd): this file wires package
// shard/etcdsource to the pooler. A build with -tags noetcd leaves it
// and etcd's client out (etcd_off.go).

// etcdClientConfig is the shard_etcd_* settings' client configuration.
func etcdClientConfig(st *config.Settings) etcdsource.ClientConfig {
	return etcdsource.ClientConfig{Endpoints: st.ShardEtcdEndpoints, CAFile: st.ShardEtcdCAFile, CertFile: st.ShardEtcdCertFile,
		KeyFile: st.ShardEtcdKeyFile, User: st.ShardEtcdUser, Password: st.ShardEtcdPassword}
}

// startShardSource starts watching the map in etcd when shard_source =
// etcd (nil, nil otherwise), after the listeners are open (the record
// names the address clients reach) and before Serve (so that the map,
// when etcd answers, is in force before the first client). The closer
// stops the watch and removes the instance's record.
func startShardSource(cfg *config.Config, svc *pooler.Service, log *slog.Logger) (io.Closer, error) {
	st := &cfg.Settings
	if st.ShardSource != "etcd" {
		return nil, nil
	}
	listen := ""
	for _, a := range svc.Addrs() {
		if _, ok := a.(*net.TCPAddr); ok {
			listen = a.String()
			break
		}
	}
	instance := st.ShardEtcdInstance
	if instance == "" {
		host, err := os.Hostname()
		if err != nil {
			host = "localhost"
		}
		port := strconv.Itoa(st.ListenPort)
		if _, p, err := net.SplitHostPort(listen); err == nil {
			port = p
		}
		instance = host + ":" + port
	}
	fp := &fleetPauses{svc: svc, ready: make(chan struct{}), held: map[string]heldPause{}}
	src, err := etcdsource.Start(etcdsource.Config{ClientConfig: etcdClientConfig(st), Prefix: st.ShardEtcdPrefix,
		Instance: instance, Listen: listen, Apply: svc.ApplyShardMap, Pauses: fp.set, Log: log})
	if err != nil {
		return nil, err
	}
	fp.src = src
	close(fp.ready)
	svc.SetShardSource(etcdState{src})
	return src, nil
}

// fleetPauses puts the fleet's pauses (`pgturnstile shard move`) in
// force on this instance: each new pause key pauses its range, as PAUSE
// SHARD does, and is confirmed to etcd once no transaction in the range
// runs here; a key that goes resumes its range.
type fleetPauses struct {
	svc   *pooler.Service
	src   *etcdsource.Source // set before ready is closed
	ready chan struct{}

	mu   sync.Mutex
	held map[string]heldPause
}

type heldPause struct {
	p      etcdsource.Pause
	cancel context.CancelFunc
}

// set is etcdsource.Config.Pauses: the whole set, from the source's
// goroutine; it must not block.
func (fp *fleetPauses) set(pauses map[string]etcdsource.Pause) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	for key, h := range fp.held {
		if p, ok := pauses[key]; ok && p.Revision == h.p.Revision {
			continue
		}
		h.cancel()
		delete(fp.held, key)
		if h.p.Err == "" {
			fp.svc.ResumeShardRange(h.p.Cluster, h.p.Colo, h.p.Range)
		}
	}
	for key, p := range pauses {
		if _, ok := fp.held[key]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		fp.held[key] = heldPause{p: p, cancel: cancel}
		if p.Err != "" {
			go fp.ack(key, p.Revision, errors.New(p.Err))
			continue
		}
		// Paused now, before set returns (so before the source writes
		// this instance's record or Start returns); drained after.
		drained, err := fp.svc.PauseShardRange(p.Cluster, p.Colo, p.Range)
		if err != nil {
			fp.held[key] = heldPause{p: etcdsource.Pause{Err: err.Error(), Revision: p.Revision}, cancel: cancel}
			go fp.ack(key, p.Revision, err)
			continue
		}
		go func() {
			err := drained(ctx)
			if ctx.Err() == nil {
				fp.ack(key, p.Revision, err)
			}
		}()
	}
}

func (fp *fleetPauses) ack(key string, rev int64, err error) {
	<-fp.ready
	fp.src.Ack(key, rev, err)
}

// etcdState is the source's state as the pooler reads it.
type etcdState struct{ src *etcdsource.Source }

func (e etcdState) ShardSourceState() pooler.ShardSourceState {
	st := e.src.Status()
	out := pooler.ShardSourceState{Connected: st.Connected, Latest: st.Latest, Rejected: st.Rejected, Self: e.src.Instance()}
	for _, in := range e.src.Instances() {
		out.Instances = append(out.Instances, admin.ShardInstanceRow{Instance: in.ID, Revision: in.Revision, Host: in.Host,
			PID: in.PID, Listen: in.Listen, Updated: in.Time, RejectedRevision: in.RejectedRevision, Rejected: in.Rejected})
	}
	return out
}

//go:build !noetcd

package main

import (
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"

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
	src, err := etcdsource.Start(etcdsource.Config{ClientConfig: etcdClientConfig(st), Prefix: st.ShardEtcdPrefix,
		Instance: instance, Listen: listen, Apply: svc.ApplyShardMap, Log: log})
	if err != nil {
		return nil, err
	}
	svc.SetShardSource(etcdState{src})
	return src, nil
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

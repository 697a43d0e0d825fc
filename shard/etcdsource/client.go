package etcdsource

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ClientConfig is how to reach etcd: the shard_etcd_* settings, or the
// flags of `pgturnstile shard publish|status`.
type ClientConfig struct {
	Endpoints []string
	// CAFile verifies etcd's certificate; CertFile and KeyFile are the
	// client's. Any of them turns TLS on.
	CAFile, CertFile, KeyFile string
	// User and Password authenticate to etcd (etcd's own users).
	User, Password string
	// DialTimeout bounds the connection and each read or write that
	// gives up when etcd does not answer; 0 = 2 s.
	DialTimeout time.Duration
}

func (c *ClientConfig) dialTimeout() time.Duration {
	if c.DialTimeout > 0 {
		return c.DialTimeout
	}
	return 2 * time.Second
}

// NewClient connects to etcd. Without a user it returns at once, even
// with etcd away (the client connects in the background); with one it
// must authenticate, so it fails when etcd does not answer within
// DialTimeout.
func NewClient(cc ClientConfig) (*clientv3.Client, error) {
	if len(cc.Endpoints) == 0 {
		return nil, errors.New("no etcd endpoints")
	}
	if (cc.User == "") != (cc.Password == "") {
		return nil, errors.New("an etcd user needs a password and a password a user")
	}
	tlsConf, err := tlsConfig(cc)
	if err != nil {
		return nil, err
	}
	endpoints := make([]string, len(cc.Endpoints))
	for i, e := range cc.Endpoints {
		// The client takes host:port and http(s)://host:port; with TLS
		// a bare host:port is https.
		if tlsConf != nil && !strings.Contains(e, "://") {
			e = "https://" + e
		}
		endpoints[i] = e
	}
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: cc.dialTimeout(),
		TLS:         tlsConf,
		Username:    cc.User,
		Password:    cc.Password,
		// The client's own logging would go to stderr in its format;
		// what matters is logged by Source in the pooler's.
		Logger: zap.NewNop(),
		// Keep the connection checked while no request is in flight,
		// so that a dead etcd is noticed by the probe, not much later.
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		PermitWithoutStream:  true,
	})
}

func tlsConfig(cc ClientConfig) (*tls.Config, error) {
	if cc.CAFile == "" && cc.CertFile == "" && cc.KeyFile == "" {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if cc.CAFile != "" {
		pem, err := os.ReadFile(cc.CAFile)
		if err != nil {
			return nil, fmt.Errorf("etcd CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd CA file %s: no PEM certificate", cc.CAFile)
		}
		conf.RootCAs = pool
	}
	if (cc.CertFile == "") != (cc.KeyFile == "") {
		return nil, errors.New("an etcd client certificate needs its key file and a key file its certificate")
	}
	if cc.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cc.CertFile, cc.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("etcd client certificate: %w", err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}

// MapKey is the key holding the map under prefix.
func MapKey(prefix string) string { return prefix + "/map" }

// InstancesPrefix is where instances publish their records under prefix.
func InstancesPrefix(prefix string) string { return prefix + "/instances/" }

// SourceName names the map at prefix in messages, in place of a file's
// path: "etcd:/pgturnstile/map".
func SourceName(prefix string) string { return "etcd:" + MapKey(prefix) }

// Record is what an instance publishes under InstancesPrefix: the map it
// serves, and the last one it refused.
type Record struct {
	// Revision is the mod revision of the map key the instance serves;
	// 0: none yet.
	Revision int64     `json:"revision"`
	Host     string    `json:"host"`
	PID      int       `json:"pid"`
	Listen   string    `json:"listen"`
	Time     time.Time `json:"time"`
	// RejectedRevision is the last revision the instance refused, and
	// Rejected why; both empty when it refused none.
	RejectedRevision int64  `json:"rejected_revision,omitempty"`
	Rejected         string `json:"rejected,omitempty"`
	// Paused holds the fleet's pauses (PausesPrefix) this instance has
	// put in force and drained (no transaction in the range runs), by
	// key, at the pause's mod revision; PauseErrors those it could not
	// put in force, and why.
	Paused      map[string]int64  `json:"paused,omitempty"`
	PauseErrors map[string]string `json:"pause_errors,omitempty"`
}

// PausesPrefix is where `pgturnstile shard move` pauses ranges for the
// whole fleet: one key per colocation, "<cluster>.<colo>", so that one
// move at a time holds a colocation.
func PausesPrefix(prefix string) string { return prefix + "/pauses/" }

// Pause is the value of a key under PausesPrefix: the range paused, the
// move holding it, and (from etcd) the key's mod revision.
type Pause struct {
	Cluster string    `json:"cluster"`
	Colo    string    `json:"colo"`
	Range   string    `json:"range"`
	Move    string    `json:"move"`
	By      string    `json:"by"`
	Started time.Time `json:"started"`
	// Revision is the key's mod revision (not stored in the value);
	// Err is set when the value cannot be read.
	Revision int64  `json:"-"`
	Err      string `json:"-"`
}

func readPause(kv *mvccpb.KeyValue) Pause {
	var p Pause
	if err := json.Unmarshal(kv.Value, &p); err != nil {
		p.Err = "unreadable pause: " + err.Error()
	}
	p.Revision = kv.ModRevision
	return p
}

// Instance is one instance's record and its name.
type Instance struct {
	ID string
	Record
}

// Publish writes a map document under prefix and returns its revision.
// Checking it is the caller's (shard.Parse, shard.ParseStandalone).
func Publish(ctx context.Context, cli *clientv3.Client, prefix string, doc []byte) (int64, error) {
	resp, err := cli.Put(ctx, MapKey(prefix), string(doc))
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// FleetStatus is what `pgturnstile shard status` prints: the map's
// revision (0: no map) and every instance's record, by name.
type FleetStatus struct {
	MapRevision int64
	Instances   []Instance
	// Pauses are the fleet's pauses, by key.
	Pauses map[string]Pause
}

// Converged says whether every instance serves MapRevision (and there is
// at least one).
func (f FleetStatus) Converged() bool {
	if len(f.Instances) == 0 || f.MapRevision == 0 {
		return false
	}
	for _, in := range f.Instances {
		if in.Revision != f.MapRevision {
			return false
		}
	}
	return true
}

// ReadStatus reads the map's revision and the instances' records under
// prefix, at one revision.
func ReadStatus(ctx context.Context, cli *clientv3.Client, prefix string) (FleetStatus, error) {
	resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return FleetStatus{}, err
	}
	var st FleetStatus
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		switch {
		case k == MapKey(prefix):
			st.MapRevision = kv.ModRevision
		case strings.HasPrefix(k, InstancesPrefix(prefix)):
			in := Instance{ID: strings.TrimPrefix(k, InstancesPrefix(prefix))}
			if err := json.Unmarshal(kv.Value, &in.Record); err != nil {
				in.Rejected = "unreadable record: " + err.Error()
			}
			st.Instances = append(st.Instances, in)
		case strings.HasPrefix(k, PausesPrefix(prefix)):
			if st.Pauses == nil {
				st.Pauses = map[string]Pause{}
			}
			st.Pauses[strings.TrimPrefix(k, PausesPrefix(prefix))] = readPause(kv)
		}
	}
	sort.Slice(st.Instances, func(i, j int) bool { return st.Instances[i].ID < st.Instances[j].ID })
	return st, nil
}

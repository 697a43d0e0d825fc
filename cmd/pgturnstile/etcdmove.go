//go:build !noetcd

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/shard/etcdsource"
)

// etcdFleet is the instances that watch the map in etcd. The move's
// pause is one key under the move's own lease: if the move dies, the
// key goes when the lease expires and every instance resumes on the map
// then in force, old or new, never half of each.
type etcdFleet struct {
	cli    *clientv3.Client
	prefix string
	out    io.Writer

	mapRev, newRev int64
	oldDoc         []byte

	lease    clientv3.LeaseID
	kaCancel context.CancelFunc
	mv       shard.Move
	key      string // the pause key, relative to PausesPrefix; "": none held
	pauseRev int64
}

// pausePoll is how often the fleet's records are read while waiting for
// them: etcd answers a read in well under a millisecond, and each poll
// is one range read of the prefix.
const pausePoll = 5 * time.Millisecond

// moveLeaseTTL bounds how long a range stays paused after the move
// process dies.
const moveLeaseTTL = 10

func newEtcdFleet(ef *etcdFlags, out io.Writer) (moveFleet, error) {
	cc, prefix, _, err := ef.resolve()
	if err != nil {
		return nil, err
	}
	cli, err := etcdsource.NewClient(cc)
	if err != nil {
		return nil, err
	}
	return &etcdFleet{cli: cli, prefix: prefix, out: out}, nil
}

func (f *etcdFleet) readMap(ctx context.Context) ([]byte, string, error) {
	doc, rev, err := etcdsource.ReadMap(ctx, f.cli, f.prefix)
	if err != nil {
		return nil, "", err
	}
	if rev == 0 {
		return nil, "", fmt.Errorf("no map at %s", etcdsource.MapKey(f.prefix))
	}
	f.oldDoc, f.mapRev = doc, rev
	return doc, etcdsource.SourceName(f.prefix), nil
}

func (f *etcdFleet) pause(ctx context.Context, mv shard.Move) ([]string, error) {
	grant, err := f.cli.Grant(ctx, moveLeaseTTL)
	if err != nil {
		return nil, err
	}
	f.lease = grant.ID
	kctx, kcancel := context.WithCancel(context.Background())
	ka, err := f.cli.KeepAlive(kctx, f.lease)
	if err != nil {
		kcancel()
		return nil, err
	}
	f.kaCancel = kcancel
	go func() {
		for range ka {
		}
	}()
	host, _ := os.Hostname()
	p := etcdsource.Pause{Cluster: mv.Cluster, Colo: mv.Colo, Range: shard.Range{First: mv.First, Last: mv.Last}.String(),
		Move: fmt.Sprintf("%x", int64(f.lease)), By: fmt.Sprintf("%s pid %d", host, os.Getpid()), Started: time.Now().UTC()}
	rev, err := etcdsource.AcquirePause(ctx, f.cli, f.prefix, p, f.lease)
	if err != nil {
		var held *etcdsource.HeldError
		if errors.As(err, &held) {
			return nil, &heldError{held.Error()}
		}
		return nil, err
	}
	f.mv, f.key, f.pauseRev = mv, strings.TrimPrefix(etcdsource.PauseKey(f.prefix, mv.Cluster, mv.Colo), etcdsource.PausesPrefix(f.prefix)), rev
	return f.confirmed(ctx)
}

// confirmed waits until every instance's record says it holds the pause
// with nothing in the range running, and returns them.
func (f *etcdFleet) confirmed(ctx context.Context) ([]string, error) {
	return f.wait(ctx, "confirm the pause", func(in etcdsource.Instance) (bool, error) {
		if msg, ok := in.PauseErrors[f.key]; ok {
			return false, fmt.Errorf("instance %s cannot pause: %s", in.ID, msg)
		}
		return in.Paused[f.key] == f.pauseRev, nil
	})
}

// wait polls the fleet until ok holds for every instance (at least one).
func (f *etcdFleet) wait(ctx context.Context, what string, ok func(etcdsource.Instance) (bool, error)) ([]string, error) {
	for {
		st, err := etcdsource.ReadStatus(ctx, f.cli, f.prefix)
		if err != nil {
			return nil, err
		}
		if p, held := st.Pauses[f.key]; f.key != "" && (!held || p.Revision != f.pauseRev) {
			return nil, errors.New("the move's pause is gone from etcd (its lease expired?)")
		}
		var names, behind []string
		for _, in := range st.Instances {
			good, err := ok(in)
			if err != nil {
				return nil, err
			}
			names = append(names, in.ID)
			if !good {
				behind = append(behind, in.ID)
			}
		}
		if len(names) > 0 && len(behind) == 0 {
			sort.Strings(names)
			return names, nil
		}
		select {
		case <-ctx.Done():
			if len(names) == 0 {
				return nil, fmt.Errorf("no instance has a record under %s: %w", etcdsource.InstancesPrefix(f.prefix), ctx.Err())
			}
			return nil, fmt.Errorf("waiting for %s to %s: %w", strings.Join(behind, ", "), what, ctx.Err())
		case <-time.After(pausePoll):
		}
	}
}

// publish writes the new map, only if nobody published since readMap
// and the pause is still held, and waits until every instance serves it.
func (f *etcdFleet) publish(ctx context.Context, doc []byte) error {
	rev, ok, err := etcdsource.PublishIf(ctx, f.cli, f.prefix, doc, f.mapRev, etcdsource.PausesPrefix(f.prefix)+f.key, f.pauseRev)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("the map changed since the move read it, or the move's pause was lost: nothing published")
	}
	f.newRev = rev
	return f.serve(ctx, rev)
}

func (f *etcdFleet) serve(ctx context.Context, rev int64) error {
	_, err := f.wait(ctx, fmt.Sprintf("serve revision %d", rev), func(in etcdsource.Instance) (bool, error) {
		if in.RejectedRevision == rev {
			return false, fmt.Errorf("instance %s refused the new map: %s", in.ID, in.Rejected)
		}
		return in.Revision == rev, nil
	})
	return err
}

// restore puts the old map back if the new one is still the map in
// force, and waits until the instances serve it.
func (f *etcdFleet) restore(ctx context.Context) error {
	if f.newRev == 0 {
		return nil
	}
	rev, ok, err := etcdsource.PublishIf(ctx, f.cli, f.prefix, f.oldDoc, f.newRev, "", 0)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("the map changed since the move published it: left as it is")
	}
	key := f.key
	f.key = "" // the old map is served whether or not the pause is still held
	defer func() { f.key = key }()
	return f.serve(ctx, rev)
}

// resume deletes the pause key (if it is still the move's) and ends the
// lease.
func (f *etcdFleet) resume(ctx context.Context) error {
	if f.lease == 0 {
		return nil
	}
	var err error
	if f.key != "" {
		err = etcdsource.ReleasePause(ctx, f.cli, f.prefix, f.mv.Cluster, f.mv.Colo, f.pauseRev)
	}
	f.kaCancel()
	if _, rerr := f.cli.Revoke(ctx, f.lease); err == nil {
		err = rerr
	}
	f.lease, f.key = 0, ""
	return err
}

func (f *etcdFleet) close() {
	if f.lease != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = f.resume(ctx)
		cancel()
	}
	_ = f.cli.Close()
}

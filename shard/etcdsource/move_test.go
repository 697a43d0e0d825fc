package etcdsource

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/etcdtest"
)

// The move's side, against a real etcd: a pause key is taken once per
// colocation (a second move is refused, naming the holder); an instance
// hands the pauses to Config.Pauses — those present at its start before
// Start returns — and publishes its confirmations (Ack) in its record; a
// pause that goes is handed over as gone and its confirmation dropped;
// PublishIf writes only over the revision read and while the pause is
// held; ReleasePause removes only the pause it created.
func TestMovePausesThroughTheFleet(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := client(t, etcd.Endpoint())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mapRev := publish(t, cli, mapDoc("s0"))

	lease, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	p := Pause{Cluster: "app", Colo: "org", Range: "2-3", Move: "m1", By: "test", Started: time.Now().UTC()}
	rev, err := AcquirePause(ctx, cli, prefix, p, lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	var held *HeldError
	if _, err := AcquirePause(ctx, cli, prefix, Pause{Cluster: "app", Colo: "org", Range: "0", Move: "m2"}, lease.ID); !errors.As(err, &held) ||
		held.Holder.Move != "m1" || held.Holder.Range != "2-3" || held.Holder.Revision != rev {
		t.Fatalf("a second pause of app.org: %v (%+v)", err, held)
	}
	// Another colocation is free.
	other, err := AcquirePause(ctx, cli, prefix, Pause{Cluster: "app", Colo: "dev", Range: "0", Move: "m3"}, lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := ReleasePause(ctx, cli, prefix, "app", "dev", other); err != nil {
		t.Fatal(err)
	}

	// An instance started while the pause exists gets it before Start
	// returns.
	var mu sync.Mutex
	var seen []map[string]Pause
	pauses := func(m map[string]Pause) {
		mu.Lock()
		seen = append(seen, maps.Clone(m))
		mu.Unlock()
	}
	last := func() map[string]Pause {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			return nil
		}
		return seen[len(seen)-1]
	}
	pl := &pooler{}
	src, err := Start(Config{ClientConfig: ClientConfig{Endpoints: []string{etcd.Endpoint()}, DialTimeout: time.Second},
		Prefix: prefix, Instance: "i1", Apply: pl.apply, Pauses: pauses, LeaseTTL: 2 * time.Second, ProbeInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	if got := last()["app.org"]; got.Revision != rev || got.Range != "2-3" || got.Move != "m1" {
		t.Fatalf("pauses at start: %+v", seen)
	}
	// Confirmed: the record says so; an Ack of an old revision is
	// dropped.
	src.Ack("app.org", rev-1, nil)
	src.Ack("app.org", rev, nil)
	eventually(t, 5*time.Second, "the record holds the pause", func() bool {
		st := fleet(t, cli)
		return len(st.Instances) == 1 && st.Instances[0].Paused["app.org"] == rev && st.Pauses["app.org"].Revision == rev
	})

	// PublishIf: over another revision, refused; with the pause held,
	// written.
	if _, ok, err := PublishIf(ctx, cli, prefix, mapDoc("s1"), mapRev-1, PauseKey(prefix, "app", "org"), rev); err != nil || ok {
		t.Fatalf("PublishIf over a stale revision: %v, %v", ok, err)
	}
	newRev, ok, err := PublishIf(ctx, cli, prefix, mapDoc("s1"), mapRev, PauseKey(prefix, "app", "org"), rev)
	if err != nil || !ok {
		t.Fatalf("PublishIf: %v, %v", ok, err)
	}
	eventually(t, 5*time.Second, "the instance serves the new map", func() bool { db, r := pl.served(); return db == "s1" && r == newRev })

	// ReleasePause with another revision leaves the key; with its own,
	// the pause goes, the instance is told, and its record drops it.
	if err := ReleasePause(ctx, cli, prefix, "app", "org", rev+100); err != nil {
		t.Fatal(err)
	}
	if st := fleet(t, cli); st.Pauses["app.org"].Revision != rev {
		t.Fatalf("a release of another revision removed the pause: %+v", st.Pauses)
	}
	if err := ReleasePause(ctx, cli, prefix, "app", "org", rev); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the pause is gone everywhere", func() bool {
		st := fleet(t, cli)
		_, inSet := last()["app.org"]
		return !inSet && len(st.Pauses) == 0 && len(st.Instances) == 1 && len(st.Instances[0].Paused) == 0
	})

	// A pause whose lease is gone: PublishIf refuses, since the fleet may
	// have resumed on the map in force.
	rev2, err := AcquirePause(ctx, cli, prefix, p, lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := PublishIf(ctx, cli, prefix, mapDoc("s0"), newRev, PauseKey(prefix, "app", "org"), rev2); err != nil || ok {
		t.Fatalf("PublishIf after the pause's lease ended: %v, %v", ok, err)
	}
	// An error from the instance is published as such.
	lease2, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	rev3, err := AcquirePause(ctx, cli, prefix, p, lease2.ID)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the new pause reaches the instance", func() bool { return last()["app.org"].Revision == rev3 })
	src.Ack("app.org", rev3, errors.New("no such colo"))
	eventually(t, 5*time.Second, "the record holds the error", func() bool {
		st := fleet(t, cli)
		return len(st.Instances) == 1 && st.Instances[0].PauseErrors["app.org"] == "no such colo" && st.Instances[0].Paused["app.org"] == 0
	})
}

package etcdsource

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The move's side of the fleet's pauses (`pgturnstile shard move`): a
// pause key is created under the move's lease, so that a move that dies
// leaves no range paused for longer than the lease's TTL, and only where
// no other move holds the colocation, which refuses a second move of an
// overlapping range.

// PauseKey is the key pausing a range of cluster.colo.
func PauseKey(prefix, cluster, colo string) string {
	return PausesPrefix(prefix) + cluster + "." + colo
}

// HeldError is AcquirePause's refusal: another move holds the colocation.
type HeldError struct{ Holder Pause }

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s.%s is held by move %s (range %s, by %s, since %s)", e.Holder.Cluster, e.Holder.Colo,
		e.Holder.Move, e.Holder.Range, e.Holder.By, e.Holder.Started.Format("15:04:05.000"))
}

// AcquirePause creates p's key under lease unless it exists, and returns
// its revision; a key that exists is a *HeldError.
func AcquirePause(ctx context.Context, cli *clientv3.Client, prefix string, p Pause, lease clientv3.LeaseID) (int64, error) {
	key := PauseKey(prefix, p.Cluster, p.Colo)
	value, err := json.Marshal(p)
	if err != nil {
		return 0, err
	}
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value), clientv3.WithLease(lease))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return 0, err
	}
	if !resp.Succeeded {
		holder := Pause{Cluster: p.Cluster, Colo: p.Colo, Move: "?"}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			holder = readPause(kvs[0])
		}
		return 0, &HeldError{Holder: holder}
	}
	return resp.Header.Revision, nil
}

// ReleasePause deletes the pause key if it is still the one created at
// revision rev (a lease that expired meanwhile may have let another move
// take it).
func ReleasePause(ctx context.Context, cli *clientv3.Client, prefix, cluster, colo string, rev int64) error {
	key := PauseKey(prefix, cluster, colo)
	_, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
		Then(clientv3.OpDelete(key)).
		Commit()
	return err
}

// ReadMap reads the map document and its mod revision (0: none).
func ReadMap(ctx context.Context, cli *clientv3.Client, prefix string) ([]byte, int64, error) {
	resp, err := cli.Get(ctx, MapKey(prefix))
	if err != nil {
		return nil, 0, err
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	return resp.Kvs[0].Value, resp.Kvs[0].ModRevision, nil
}

// PublishIf writes doc as the map if the map's mod revision is still
// prev and the pause key holdKey (if not empty) is still the one created
// at holdRev, and returns the new revision; ok false: someone else
// published since, or the pause was lost (its lease expired: the fleet
// may have resumed on the old map, so publishing now could serve a key
// from two hosts).
func PublishIf(ctx context.Context, cli *clientv3.Client, prefix string, doc []byte, prev int64, holdKey string, holdRev int64) (rev int64, ok bool, err error) {
	key := MapKey(prefix)
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", prev)}
	if holdKey != "" {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(holdKey), "=", holdRev))
	}
	resp, err := cli.Txn(ctx).If(cmps...).Then(clientv3.OpPut(key, string(doc))).Commit()
	if err != nil {
		return 0, false, err
	}
	return resp.Header.Revision, resp.Succeeded, nil
}

// Package cancelpeer carries cancel requests between peered poolers
// (PgBouncer 1.23's peer_id and [peers]): the cancel key's layout, which
// names the process that owns a key and how many more forwards a request
// may take, and the sending of a request on to its owner, bounded per
// peer, with the counts SHOW PEER_POOLS prints.
//
// Several poolers behind one TCP load balancer, or sharing one port with
// so_reuseport, each have their own peer_id. A client's cancel key carries
// the peer id of the process it logged in to, so a CancelRequest that the
// balancer hands to another process is forwarded, as it came, to the owner.
//
// The key's layout is PgBouncer's, so that pgturnstile and PgBouncer
// processes can be peers of one another:
//
//	byte 0     random, sign bit cleared (the "PID" half is positive)
//	bytes 1-2  the peer id, little-endian (peer_id > 0 only)
//	bytes 3-7  random, except byte 7's two low bits: the forwarding TTL,
//	           3 in every key handed out; each forward takes one, and a
//	           request whose TTL is 0 is dropped (a loop in [peers])
//
// The keys a process registers always have TTL 3, so a request for one of
// its own keys is looked up with the TTL bits set again (Own).
package cancelpeer

import (
	"errors"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/listener"
	"github.com/pgturnstile/pgturnstile/wire"
)

// ttlMask is the forwarding TTL's bits in byte 7.
const ttlMask = 0x03

// Encode puts the peer id and a full TTL into a random key; with peering
// off (peerID 0) only the sign bit is cleared.
func Encode(key *[8]byte, peerID int) {
	if peerID > 0 {
		key[1] = byte(peerID)
		key[2] = byte(peerID >> 8)
		key[7] |= ttlMask
	}
	key[0] &= 0x7F
}

// Owner is the peer id a cancel key carries.
func Owner(key [8]byte) int { return int(key[1]) | int(key[2])<<8 }

// Own is a key of this process as it registered it: with its TTL full,
// whatever forwards the request took on its way here.
func Own(key [8]byte) [8]byte {
	key[7] |= ttlMask
	return key
}

// Hop takes one forward from the key's TTL; false when none is left (a
// loop in [peers]), and the request is to be dropped.
func Hop(key *[8]byte) bool {
	if key[7]&ttlMask == 0 {
		return false
	}
	key[7]--
	return true
}

// Address is where a peer listens: host and port, or the Unix socket
// HOST/.s.PGSQL.PORT for a host that is a directory (or an abstract name).
func Address(p *config.Peer) (network, address string) {
	if strings.HasPrefix(p.Host, "/") || strings.HasPrefix(p.Host, "@") {
		return "unix", listener.UnixSocketPath(p.Host, p.Port)
	}
	return "tcp", net.JoinHostPort(p.Host, strconv.Itoa(p.Port))
}

// ErrWaitTimeout is a request that found no free slot of its peer's pool,
// or got one too late, within its deadline: PgBouncer's
// cancel_wait_timeout.
var ErrWaitTimeout = errors.New("cancel_wait_timeout")

// Dial opens a connection to a peer within timeout.
type Dial func(network, address string, timeout time.Duration) (net.Conn, error)

// Pools holds the peer pools: one per peer a cancel request was forwarded
// to, made on first use as PgBouncer's, and dropped when a RELOAD removes
// the peer. Its mu is a leaf lock, and so is each pool's.
type Pools struct {
	mu    sync.Mutex
	pools map[int]*pool
}

func (pr *Pools) pool(id int) *pool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.pools == nil {
		pr.pools = map[int]*pool{}
	}
	p := pr.pools[id]
	if p == nil {
		p = &pool{id: id}
		pr.pools[id] = p
	}
	return p
}

// Send passes key on to peer id (at peer) on a connection of its own, as
// PgBouncer's peer pool does: at most size at once, each waiting for a
// slot and for the peer until deadline (ErrWaitTimeout, or the dial's or
// the connection's timeout). It returns once the peer has closed the
// connection: by then the peer has passed the request on.
func (pr *Pools) Send(id int, peer *config.Peer, size int, key [8]byte, deadline time.Time, dial Dial) error {
	p := pr.pool(id)
	p.waiting.Add(1)
	if !p.acquire(size, time.Until(deadline)) {
		p.waiting.Add(-1)
		return ErrWaitTimeout
	}
	defer p.release()
	if !time.Now().Before(deadline) {
		// The slot came as the wait ended: too late to send.
		p.waiting.Add(-1)
		return ErrWaitTimeout
	}
	return p.send(peer, key, deadline, dial)
}

// Reload applies a new [peers]: the pools of peers that are gone are
// dropped, with PgBouncer's warning (a request in flight to one finishes
// on its own). old is nil at start.
func (pr *Pools) Reload(log *slog.Logger, old, cfg *config.Config) {
	if old == nil {
		return
	}
	var gone []int
	for id := range old.Peers {
		if cfg.Peers[id] == nil {
			gone = append(gone, id)
		}
	}
	slices.Sort(gone)
	for _, id := range gone {
		log.Warn("dropping peer " + strconv.Itoa(id) + " as it does not exist anymore")
		pr.mu.Lock()
		delete(pr.pools, id)
		pr.mu.Unlock()
	}
}

// Rows is SHOW PEER_POOLS, by peer id.
func (pr *Pools) Rows() []admin.PeerPool {
	pr.mu.Lock()
	out := make([]admin.PeerPool, 0, len(pr.pools))
	for _, p := range pr.pools {
		out = append(out, p.row())
	}
	pr.mu.Unlock()
	slices.SortFunc(out, func(a, b admin.PeerPool) int { return a.PeerID - b.PeerID })
	return out
}

// Count is how many peer pools there are (SHOW LISTS' peer_pools).
func (pr *Pools) Count() int {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return len(pr.pools)
}

// pool bounds the cancel requests in flight to one peer and counts them
// for SHOW PEER_POOLS. A request is waiting (cl_waiting_cancel_req) from
// its arrival until it is sent, logging in (sv_login) while its
// connection is being made, and active (cl_active_cancel_req,
// sv_active_cancel) from the send until the peer closes.
type pool struct {
	id                     int
	waiting, login, active atomic.Int32

	mu    sync.Mutex
	inUse int             // slots taken, at most the pool size
	queue []chan struct{} // requests waiting for a slot, oldest first
}

// acquire takes a slot, waiting up to timeout for one; false: none came.
func (p *pool) acquire(size int, timeout time.Duration) bool {
	p.mu.Lock()
	if p.inUse < max(size, 1) {
		p.inUse++
		p.mu.Unlock()
		return true
	}
	ch := make(chan struct{}, 1)
	p.queue = append(p.queue, ch)
	p.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
	}
	p.mu.Lock()
	if i := slices.Index(p.queue, ch); i >= 0 {
		p.queue = slices.Delete(p.queue, i, i+1)
		p.mu.Unlock()
		return false
	}
	p.mu.Unlock()
	return true // the slot came as the timer fired: use it
}

// release gives the slot to the oldest waiting request, or back.
func (p *pool) release() {
	p.mu.Lock()
	if len(p.queue) > 0 {
		ch := p.queue[0]
		p.queue = p.queue[1:]
		p.mu.Unlock()
		ch <- struct{}{} // its one slot, empty
		return
	}
	p.inUse--
	p.mu.Unlock()
}

// send dials the peer, sends the CancelRequest and waits for the peer to
// close the connection. The request counts as waiting until it is sent,
// then as active.
func (p *pool) send(peer *config.Peer, key [8]byte, deadline time.Time, dial Dial) error {
	sent := false
	defer func() {
		if sent {
			p.active.Add(-1)
		} else {
			p.waiting.Add(-1)
		}
	}()
	network, address := Address(peer)
	p.login.Add(1)
	conn, err := dial(network, address, time.Until(deadline))
	p.login.Add(-1)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(deadline)
	if _, err := conn.Write(wire.AppendCancelRequest(nil, key[:])); err != nil {
		return err
	}
	sent = true
	p.waiting.Add(-1)
	p.active.Add(1)
	var b [1]byte
	if _, err := conn.Read(b[:]); err != nil && isTimeout(err) {
		return err
	}
	return nil // closed (EOF, or reset): done
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (p *pool) row() admin.PeerPool {
	active := int(p.active.Load())
	return admin.PeerPool{
		PeerID:             p.id,
		ClActiveCancelReq:  active,
		ClWaitingCancelReq: int(p.waiting.Load()),
		SvActiveCancel:     active,
		SvLogin:            int(p.login.Load()),
	}
}

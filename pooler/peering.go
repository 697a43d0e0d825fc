package pooler

import (
	"crypto/rand"
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

// Peering (PgBouncer 1.23+): several poolers behind one TCP load balancer,
// or sharing one port with so_reuseport, each with its own peer_id. A
// client's cancel key carries the peer id of the process it logged in to,
// so a CancelRequest that the balancer hands to another process is
// forwarded, as it came, to the owner named in [peers].
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
// its own keys is looked up with the TTL bits set again.
const cancelTTLMask = 0x03

// newCancelKey fills key with a new cancel key for a client of this
// process.
func (s *Service) newCancelKey(key *[8]byte) error {
	if _, err := rand.Read(key[:]); err != nil {
		return err
	}
	encodeCancelKey(key, s.settings().PeerID)
	return nil
}

// encodeCancelKey puts the peer id and a full TTL into a random key.
func encodeCancelKey(key *[8]byte, peerID int) {
	if peerID > 0 {
		key[1] = byte(peerID)
		key[2] = byte(peerID >> 8)
		key[7] |= cancelTTLMask
	}
	key[0] &= 0x7F
}

// cancelKeyPeer is the peer id a cancel key carries.
func cancelKeyPeer(key [8]byte) int { return int(key[1]) | int(key[2])<<8 }

// cancelRequest handles a CancelRequest that client c (a connection that
// sent nothing else) carries: with peering on, a key of another peer is
// forwarded to it, and one of ours is looked up as always (Service.cancel).
func (s *Service) cancelRequest(c *client, key [8]byte) {
	own := s.settings().PeerID
	if own > 0 {
		if owner := cancelKeyPeer(key); owner != own {
			s.forwardCancel(c, owner, key)
			return
		}
		key[7] |= cancelTTLMask
	}
	s.cancel(key)
}

// forwardCancel passes c's cancel request on to the peer that owns its
// key, with one forward less in its TTL, on a connection of its own, as
// PgBouncer's peer pool does: at most the peer's pool_size (else
// default_pool_size) at once, each waiting for a slot and for the peer
// within cancel_wait_timeout. A request that cannot go ends with
// PgBouncer's "closing because" line; c hears nothing either way, as from
// Postgres.
func (s *Service) forwardCancel(c *client, owner int, key [8]byte) {
	if key[7]&cancelTTLMask == 0 {
		c.closingBecause("failed to forward cancel request because its TTL was exhausted")
		return
	}
	key[7]--
	cfg := s.config()
	peer := cfg.Peers[owner]
	if peer == nil {
		c.closingBecause("could not find peer to forward request to")
		return
	}
	c.debugf("forwarding cancellation request to peer %d", owner)
	size := peer.PoolSize
	if size < 0 {
		size = cfg.Settings.DefaultPoolSize
	}
	// One cancel_wait_timeout for the wait for a slot and the send.
	deadline := time.Now().Add(cancelWait(&cfg.Settings))
	pp := s.peers.pool(owner)
	pp.waiting.Add(1)
	if !pp.acquire(size, time.Until(deadline)) {
		pp.waiting.Add(-1)
		c.closingBecause("cancel_wait_timeout")
		return
	}
	if !time.Now().Before(deadline) {
		// The slot came as the wait ended: too late to send.
		pp.release()
		pp.waiting.Add(-1)
		c.closingBecause("cancel_wait_timeout")
		return
	}
	err := pp.send(s, peer, key, deadline)
	pp.release()
	switch {
	case err == nil:
	case isTimeout(err):
		c.closingBecause("cancel_wait_timeout")
	default:
		c.logger().Warn("sending cancel request failed: " + err.Error())
	}
}

// closingBecause logs the end of a cancel request's connection as
// PgBouncer's disconnect_client does (log_disconnections).
func (c *client) closingBecause(reason string) {
	if c.svc.logDisconnections() {
		c.logger().Info("closing because: " + reason + " (age=" + formatAge(c.svc.clock.Since(c.connected)) + ")")
	}
}

// send dials the peer, sends the CancelRequest and waits for the peer to
// close the connection: by then it has passed the request on. The request
// counts as waiting until it is sent, then as active.
func (p *peerPool) send(s *Service, peer *config.Peer, key [8]byte, deadline time.Time) error {
	sent := false
	defer func() {
		if sent {
			p.active.Add(-1)
		} else {
			p.waiting.Add(-1)
		}
	}()
	network, address := peerAddress(peer)
	p.login.Add(1)
	conn, err := s.dialTimeout(network, address, time.Until(deadline))
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

// peerAddress is where a peer listens: host and port, or the Unix socket
// HOST/.s.PGSQL.PORT.
func peerAddress(p *config.Peer) (network, address string) {
	if strings.HasPrefix(p.Host, "/") || strings.HasPrefix(p.Host, "@") {
		return "unix", listener.UnixSocketPath(p.Host, p.Port)
	}
	return "tcp", net.JoinHostPort(p.Host, strconv.Itoa(p.Port))
}

// peering holds the peer pools: one per peer a cancel request was
// forwarded to, made on first use as PgBouncer's, and dropped when a
// RELOAD removes the peer. mu is a leaf lock.
type peering struct {
	mu    sync.Mutex
	pools map[int]*peerPool
}

func (pr *peering) pool(id int) *peerPool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.pools == nil {
		pr.pools = map[int]*peerPool{}
	}
	p := pr.pools[id]
	if p == nil {
		p = &peerPool{id: id}
		pr.pools[id] = p
	}
	return p
}

// reload applies a new [peers]: the pools of peers that are gone are
// dropped, with PgBouncer's warning (a request in flight to one finishes
// on its own).
func (pr *peering) reload(log *slog.Logger, old, cfg *config.Config) {
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

// rows is SHOW PEER_POOLS, by peer id.
func (pr *peering) rows() []admin.PeerPool {
	pr.mu.Lock()
	out := make([]admin.PeerPool, 0, len(pr.pools))
	for _, p := range pr.pools {
		out = append(out, p.row())
	}
	pr.mu.Unlock()
	slices.SortFunc(out, func(a, b admin.PeerPool) int { return a.PeerID - b.PeerID })
	return out
}

func (pr *peering) count() int {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return len(pr.pools)
}

// peerPool bounds the cancel requests in flight to one peer and counts
// them for SHOW PEER_POOLS. A request is waiting (cl_waiting_cancel_req)
// from its arrival until it is sent, logging in (sv_login) while its
// connection is being made, and active (cl_active_cancel_req,
// sv_active_cancel) from the send until the peer closes.
type peerPool struct {
	id                     int
	waiting, login, active atomic.Int32

	mu    sync.Mutex
	inUse int             // slots taken, at most the pool size
	queue []chan struct{} // requests waiting for a slot, oldest first
}

// acquire takes a slot, waiting up to timeout for one; false: none came.
func (p *peerPool) acquire(size int, timeout time.Duration) bool {
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
func (p *peerPool) release() {
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

func (p *peerPool) row() admin.PeerPool {
	active := int(p.active.Load())
	return admin.PeerPool{
		PeerID:             p.id,
		ClActiveCancelReq:  active,
		ClWaitingCancelReq: int(p.waiting.Load()),
		SvActiveCancel:     active,
		SvLogin:            int(p.login.Load()),
	}
}

package pooler

import (
	"crypto/rand"
	"errors"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/cancelpeer"
)

// Peering (PgBouncer 1.23+): with peer_id set, a client's cancel key
// names the process it logged in to, and a CancelRequest for another
// peer's key is forwarded to it from [peers]. The key's layout and the
// peer pools are internal/cancelpeer's.

// newCancelKey fills key with a new cancel key for a client of this
// process.
func (s *Service) newCancelKey(key *[8]byte) error {
	if _, err := rand.Read(key[:]); err != nil {
		return err
	}
	cancelpeer.Encode(key, s.settings().PeerID)
	return nil
}

// cancelRequest handles a CancelRequest that client c (a connection that
// sent nothing else) carries: with peering on, a key of another peer is
// forwarded to it, and one of ours is looked up as always (Service.cancel).
func (s *Service) cancelRequest(c *client, key [8]byte) {
	own := s.settings().PeerID
	if own > 0 {
		if owner := cancelpeer.Owner(key); owner != own {
			s.forwardCancel(c, owner, key)
			return
		}
		key = cancelpeer.Own(key)
	}
	s.cancel(key)
}

// forwardCancel passes c's cancel request on to the peer that owns its
// key, with one forward less in its TTL, at most the peer's pool_size
// (else default_pool_size) at once, each within cancel_wait_timeout. A
// request that cannot go ends with PgBouncer's "closing because" line; c
// hears nothing either way, as from Postgres.
func (s *Service) forwardCancel(c *client, owner int, key [8]byte) {
	if !cancelpeer.Hop(&key) {
		c.closingBecause("failed to forward cancel request because its TTL was exhausted")
		return
	}
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
	err := s.peers.Send(owner, peer, size, key, deadline, s.dialTimeout)
	switch {
	case err == nil:
	case errors.Is(err, cancelpeer.ErrWaitTimeout), isTimeout(err):
		c.closingBecause("cancel_wait_timeout")
	default:
		c.logger().Warn("sending cancel request failed: " + err.Error())
	}
}

package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"math/rand/v2"
	"testing"
)

// hmacSHA256 is written out over sha256.Sum256: it must give crypto/hmac's
// answer for keys shorter than, as long as and longer than a block, and
// messages that fit its stack buffer and that do not.
func TestHMACSHA256MatchesCryptoHMAC(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, klen := range []int{0, 1, 32, 63, 64, 65, 100, 200} {
		for _, mlen := range []int{0, 1, 55, 56, 64, 447, 448, 449, 1000, 5000} {
			key := make([]byte, klen)
			msg := make([]byte, mlen)
			for i := range key {
				key[i] = byte(r.Uint32())
			}
			for i := range msg {
				msg[i] = byte(r.Uint32())
			}
			m := hmac.New(sha256.New, key)
			m.Write(msg)
			want := m.Sum(nil)
			if got := hmacSHA256(key, string(msg)); !bytes.Equal(got, want) {
				t.Fatalf("key %d bytes, message %d bytes: %x; crypto/hmac says %x", klen, mlen, got, want)
			}
		}
	}
}

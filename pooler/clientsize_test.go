package pooler

import (
	"testing"
	"unsafe"
)

// TestClientSizeClass: the client struct is every client's, parked ones
// included, and on 64-bit systems the allocator's size class it falls in
// (448 bytes, the one below 480 and 512) is what an idle client costs
// beyond its socket (issue 35, item 4). A field that pushes it over is
// better a pointer to what few clients need, or a smaller type.
func TestClientSizeClass(t *testing.T) {
	// (On 32-bit systems the struct is smaller still.)
	if n := unsafe.Sizeof(client{}); unsafe.Sizeof(uintptr(0)) == 8 && n > 448 {
		t.Errorf("client is %d bytes, over the 448-byte size class", n)
	}
}

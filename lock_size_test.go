package padlock

import (
	"testing"
	"unsafe"
)

// TestLockSizeClass guards the bytes of the uncontended lock cycle: every
// Acquire allocates a Lock (with its lease inside), and Go rounds an
// allocation up to its size class, so a field that pushes the struct past
// 416 bytes costs 32 bytes more per cycle (BenchmarkAcquireRelease's B/op).
// Reorder fields to fill padding first; raise the bound only knowingly.
func TestLockSizeClass(t *testing.T) {
	const sizeClass = 416 // runtime size classes around it: 384, 416, 448
	if got := unsafe.Sizeof(Lock{}); got > sizeClass {
		t.Errorf("got unsafe.Sizeof(Lock{}) = %d, want at most %d (the size class a lock cycle allocated before)", got, sizeClass)
	}
}

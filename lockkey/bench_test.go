package lockkey_test

import (
	"testing"

	"github.com/padlockgo/padlock/lockkey"
)

// BenchmarkCanonPart measures a key part on the request path: the common
// spellings, already canonical, and ones that need rewriting.
func BenchmarkCanonPart(b *testing.B) {
	benches := []struct {
		name string
		c    lockkey.Canon
		raw  string
	}{
		{"text/ascii", lockkey.Text(), "order-42"},
		{"text/nfd", lockkey.Text(), "cafe\u0301"},
		{"int64/canonical", lockkey.Int(64), "1234567"},
		{"int64/spelled", lockkey.Int(64), "+01234567"},
		{"uuid/upper", lockkey.UUID(), "6BA7B810-9DAD-11D1-80B4-00C04FD430C8"},
		{"float64", lockkey.Float(64), "0.1000000000000000055511151231257827"},
	}
	for _, bb := range benches {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bb.c.Part("path param id", bb.raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Package hashslot computes Redis Cluster hash slots, as go-redis's
// internal/hashtag does, and finds for each slot a short tag that hashes
// to it.
package hashslot

import (
	"strconv"
	"strings"
	"sync"
)

// Count is the number of Redis Cluster hash slots.
const Count = 16384

// Slot returns the Redis Cluster hash slot of key, following the hash tag
// rule: hash only what is between the first '{' and the next '}', if that
// is not empty.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return Of(key)
}

// Of returns the slot s hashes to as a whole, with no hash tag rule: the
// slot of a key whose hash tag is s.
func Of(s string) int { return int(crc16(s) % Count) }

// Tags returns, for every hash slot, a short string that hashes to it.
// Computed once (a few milliseconds), on first use, and then only read.
var Tags = sync.OnceValue(func() *[Count]string {
	var tags [Count]string
	left := Count
	for n := uint64(0); left > 0; n++ {
		tag := strconv.FormatUint(n, 36)
		if s := Of(tag); tags[s] == "" {
			tags[s] = tag
			left--
		}
	}
	return &tags
})

// crc16 is CRC-16/XMODEM, the checksum Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^s[i]]
	}
	return crc
}

var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

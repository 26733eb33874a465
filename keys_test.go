package padlock

import (
	"testing"
)

func TestSlotMatchesRedis(t *testing.T) {
	// Reference values from CLUSTER KEYSLOT.
	for _, tc := range []struct {
		key  string
		want int
	}{
		{"foo", 12182},
		{"bar", 5061},
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"foo{}{bar}", 8363},
		{"foo{{bar}}zap", 4015},
		{"foo{bar}{zap}", 5061},
		{"123456789", 12739},
	} {
		if got := slot(tc.key); got != tc.want {
			t.Errorf("slot(%q) = %d, want %d", tc.key, got, tc.want)
		}
	}
}

func TestFenceKeySharesLockSlot(t *testing.T) {
	ks := keyspace{prefix: DefaultKeyPrefix, slotted: true}
	for _, key := range []string{"a", "order:42", "{x}", "}{", "a}b{c", "%7D", `\]`, "very " + string(make([]byte, 300))} {
		lk := ks.lock(key)
		if got, want := slot(ks.fence(lk)), slot(lk); got != want {
			t.Errorf("key %q: fence slot %d, lock slot %d", key, got, want)
		}
		if got, want := slot(ks.queue(lk)), slot(lk); got != want {
			t.Errorf("key %q: queue slot %d, lock slot %d", key, got, want)
		}
	}
}

func TestLockKeysAreDistinct(t *testing.T) {
	ks := keyspace{prefix: DefaultKeyPrefix}
	keys := []string{"a}", `a\]`, `a\\]`, `a\`, `a\\`, "{a}", `\[a\]`, "a", "a{", `a\[`, "a%7D", "a%257D"}
	seen := map[string]string{}
	for _, k := range keys {
		rk := ks.lock(k)
		if prev, dup := seen[rk]; dup {
			t.Fatalf("keys %q and %q both map to %q", prev, k, rk)
		}
		seen[rk] = k
		// The hash tag must span the whole escaped key.
		if got, want := slot(rk), int(crc16(rk[len(DefaultKeyPrefix)+1:len(rk)-1])%numSlots); got != want {
			t.Errorf("key %q: slot %d, want the slot of the whole key %d", k, got, want)
		}
	}
}

func TestSlotTagsCoverEverySlot(t *testing.T) {
	for s, tag := range slotTags() {
		if tag == "" || slot(tag) != s {
			t.Fatalf("slot %d: tag %q hashes to %d", s, tag, slot(tag))
		}
	}
}

// FuzzLockKeys checks the key layout for any pair of user keys: distinct
// keys get distinct lock keys, and a lock's keys share one hash slot whose
// tag is the whole escaped key.
func FuzzLockKeys(f *testing.F) {
	for _, seed := range [][2]string{{"a}", `a\]`}, {"{", `\[`}, {`\`, `\\`}, {"}x", "x"}, {"order:1", "order:1:pay"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if a == "" || b == "" {
			return
		}
		for _, ks := range []keyspace{{prefix: DefaultKeyPrefix, slotted: true}, {prefix: "app:"}} {
			la, fa, qa := ks.lockKeys(a)
			lb, _, _ := ks.lockKeys(b)
			if a != b && la == lb {
				t.Fatalf("keys %q and %q both map to %q", a, b, la)
			}
			if la != ks.lock(a) || fa != ks.fence(la) || qa != ks.queue(la) {
				t.Fatalf("lockKeys(%q) = %q, %q, %q; disagrees with lock/fence/queue", a, la, fa, qa)
			}
			if s := slot(la); ks.slotted && (slot(fa) != s || slot(qa) != s || int(crc16(la[len(ks.prefix)+1:len(la)-1])%numSlots) != s) {
				t.Fatalf("key %q: slots lock %d, fence %d, queue %d", a, s, slot(fa), slot(qa))
			}
		}
	})
}

package padlock

import (
	"testing"

	"github.com/padlockgo/padlock/internal/hashslot"
)

func TestFenceKeySharesLockSlot(t *testing.T) {
	ks := keyspace{prefix: DefaultKeyPrefix, slotted: true}
	for _, key := range []string{"a", "order:42", "{x}", "}{", "a}b{c", "%7D", `\]`, "very " + string(make([]byte, 300))} {
		lk := ks.lock(key)
		if got, want := hashslot.Slot(ks.fence(lk)), hashslot.Slot(lk); got != want {
			t.Errorf("key %q: fence slot %d, lock slot %d", key, got, want)
		}
		if got, want := hashslot.Slot(ks.queue(lk)), hashslot.Slot(lk); got != want {
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
		if got, want := hashslot.Slot(rk), hashslot.Of(rk[len(DefaultKeyPrefix)+1:len(rk)-1]); got != want {
			t.Errorf("key %q: slot %d, want the slot of the whole key %d", k, got, want)
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
			if s := hashslot.Slot(la); ks.slotted && (hashslot.Slot(fa) != s || hashslot.Slot(qa) != s || hashslot.Of(la[len(ks.prefix)+1:len(la)-1]) != s) {
				t.Fatalf("key %q: slots lock %d, fence %d, queue %d", a, s, hashslot.Slot(fa), hashslot.Slot(qa))
			}
		}
	})
}

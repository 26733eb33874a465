package padlock

import (
	"strings"

	"github.com/padlockgo/padlock/internal/hashslot"
)

// Redis key layout, for prefix P and user key K (with '{', '}' and '\' in K
// escaped as '\[', '\]' and '\\', so the hash tag always spans all of K and
// the mapping stays one-to-one; keys built by keyfunc never need it, and
// their own %-escapes pass through untouched):
//
//	P{K}          the lock: owner token, with the lease as its expiry;
//	              also the name of the channel release notices go to
//	P{K}:queue    fair-mode waiters (a companion key in the lock's slot)
//	Pfence        the fence counter, one for the whole deployment, except on
//	              Cluster, where a script may only touch keys of one slot:
//	P{K}:sem      a semaphore's permits: a sorted set of holder tokens
//	              scored by lease end (also the channel of its notices);
//	              P{K}:sem:queue its fair waiters
//	P{K}:rw       a read-write lock's readers, likewise (and its channel);
//	              P{K}:rw:w its writer, P{K}:rw:queue its waiting writers
//	Pfence:{T}    the fence counter of the lock's Cluster hash slot, where T
//	              is a short tag that hashes to that same slot
//
// So the keys left behind by any number of distinct locks are one counter,
// or on Cluster at most one per hash slot (16384). A lock key always has
// '{' right after P and fence keys never do, so no user key can name a
// fence counter.
type keyspace struct {
	prefix  string
	slotted bool // Cluster: a fence counter per hash slot
}

var keyEscaper = strings.NewReplacer(`\`, `\\`, "{", `\[`, "}", `\]`)

func (ks keyspace) lock(key string) string {
	return ks.prefix + "{" + escapeKey(key) + "}"
}

func (ks keyspace) fence(lockKey string) string {
	if !ks.slotted {
		return ks.prefix + "fence"
	}
	return ks.prefix + "fence:{" + hashslot.Tags()[hashslot.Slot(lockKey)] + "}"
}

// lockKeys returns lock(key), fence(lock(key)) and queue(lock(key)), built
// in one allocation: they are made on every Acquire.
func (ks keyspace) lockKeys(key string) (lock, fence, queue string) {
	esc := escapeKey(key)
	var all string
	if ks.slotted {
		// The prefix has no braces, so the lock key's hash tag is all of esc.
		tag := hashslot.Tags()[hashslot.Of(esc)]
		all = ks.prefix + "{" + esc + "}" + ks.prefix + "fence:{" + tag + "}" + ks.prefix + "{" + esc + "}:queue"
	} else {
		all = ks.prefix + "{" + esc + "}" + ks.prefix + "fence" + ks.prefix + "{" + esc + "}:queue"
	}
	n := len(ks.prefix) + len(esc) + 2
	m := len(all) - n - len(":queue")
	return all[:n], all[n:m], all[m:]
}

// holdKeys returns the keys of a hold on key (store_hold.go): the holders'
// key P{K}suffix, the fence counter of its slot, and its queue
// P{K}suffix:queue. Every one of them shares the slot of the lock key
// P{K}, and none can be a lock key, which always ends with '}'.
func (ks keyspace) holdKeys(key, suffix string) [3]string {
	own := ks.lock(key) + suffix
	return [3]string{own, ks.fence(own), own + ":queue"}
}

func escapeKey(key string) string {
	if !strings.ContainsAny(key, `{}\`) {
		return key
	}
	return keyEscaper.Replace(key)
}

func (ks keyspace) queue(lockKey string) string { return lockKey + ":queue" }

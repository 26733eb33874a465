package padlock

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// WithReplicaAck waits for the replicas after every write that takes a
// lock, AcquireAll's included: on a server with no replica, AcquireAll
// fails as Acquire does, and leaves no key of its set behind. (AcquireAll
// once took its set with no WAIT: a failover could lose it to a second
// owner while the first held the MultiLock.)
func TestAcquireAllWaitsForReplicas(t *testing.T) {
	t.Parallel()
	l, _, rdb := startLocker(t, WithReplicaAck(1, 50*time.Millisecond))
	ctx := ctxFor(t)
	keys := []string{testKey(t) + ":a", testKey(t) + ":b"}
	m, err := l.AcquireAll(ctx, keys, Options{})
	if err == nil {
		_ = m.Release(ctx)
		t.Fatal("AcquireAll with no replica to acknowledge it succeeded, want ErrUnavailable")
	}
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "0 of 1 acknowledged") {
		t.Errorf("AcquireAll: got %v, want ErrUnavailable saying no replica acknowledged", err)
	}
	for _, k := range keys {
		if n, err := rdb.Exists(ctx, l.keys.lock(k)).Result(); err != nil || n != 0 {
			t.Errorf("%s is left behind after the refused AcquireAll (%d, %v)", k, n, err)
		}
	}
}

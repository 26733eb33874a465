package redistest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// awaitAck waits until n replicas have acknowledged the last write on
// conn, or fails after sentinelTimeout. Each WAIT is short, well under
// the client's read timeout (clientIOTimeout): one WAIT as long as the
// whole wait would be cut off by the client on a loaded machine, where
// the ack comes late, as "i/o timeout". WAIT counts the acks of its own
// connection's writes, hence one conn for the write and the WAITs.
func awaitAck(ctx context.Context, conn *redis.Conn, n int) error {
	ctx, cancel := context.WithTimeout(ctx, sentinelTimeout)
	defer cancel()
	var got int64
	var last error
	return poll(ctx, func() bool {
		got, last = conn.Do(ctx, "WAIT", n, 100).Int64()
		return last == nil && got >= int64(n)
	}, func() string {
		return fmt.Sprintf("%d of %d replicas acknowledged the write within %v (last WAIT: %v)", got, n, sentinelTimeout, last)
	})
}

func TestSentinelFailoverPromotesReplica(t *testing.T) {
	t.Parallel() // most of it is waiting on sentinel timers
	s := StartSentinel(t, 1)
	if got := s.MasterAddr(t); got != s.Master().Addr() {
		t.Fatalf("MasterAddr() = %s, want the master %s", got, s.Master().Addr())
	}
	c := s.Client(t)
	ctx := context.Background()
	// Replication is asynchronous: make sure k reached the replica before
	// the master dies, or the promoted replica may rightly not have it.
	conn := c.Conn()
	defer conn.Close()
	if err := conn.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET through the failover client: %v", err)
	}
	if err := awaitAck(ctx, conn, 1); err != nil {
		t.Fatalf("SET k: %v", err)
	}

	start := time.Now()
	s.Master().Kill(t)
	s.WaitMaster(t, s.Replica().Addr())
	t.Logf("failover took %v", time.Since(start))

	// The failover client follows the switch; its first command may still
	// meet the connection to the dead master.
	var err error
	for deadline := time.Now().Add(sentinelTimeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err = c.Set(ctx, "k2", "v2", 0).Err(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("SET after failover: %v", err)
	}
	if got := s.Replica().Keys(t); len(got) != 2 {
		t.Errorf("promoted replica holds keys %q, want k (replicated) and k2", got)
	}
}

func TestSentinelThreeSentinels(t *testing.T) {
	t.Parallel()
	s := StartSentinel(t, 3)
	if got := len(s.Sentinels()); got != 3 {
		t.Fatalf("len(Sentinels()) = %d, want 3", got)
	}
	// A quorum of 2 still stands with one sentinel paused.
	s.Sentinels()[0].Pause(t)
	start := time.Now()
	s.Master().Pause(t)
	s.WaitMaster(t, s.Replica().Addr())
	t.Logf("failover took %v", time.Since(start))
}

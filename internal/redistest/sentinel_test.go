package redistest

import (
	"context"
	"testing"
	"time"
)

func TestSentinelFailoverPromotesReplica(t *testing.T) {
	t.Parallel() // most of it is waiting on sentinel timers
	s := StartSentinel(t, 1)
	if got := s.MasterAddr(t); got != s.Master().Addr() {
		t.Fatalf("MasterAddr() = %s, want the master %s", got, s.Master().Addr())
	}
	c := s.Client(t)
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET through the failover client: %v", err)
	}
	// Replication is asynchronous: make sure k reached the replica before
	// the master dies, or the promoted replica may rightly not have it.
	if n, err := c.Do(ctx, "WAIT", 1, 2000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v; want 1 replica acknowledged", n, err)
	}

	start := time.Now()
	s.Master().Kill(t)
	s.WaitMaster(t, s.Replica().Addr())
	t.Logf("failover took %v", time.Since(start))

	// The failover client follows the switch; its first command may still
	// meet the connection to the dead master.
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
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

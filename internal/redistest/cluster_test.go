package redistest

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

func TestClusterServesAllSlots(t *testing.T) {
	t.Parallel() // a new cluster waits 2 s before it turns ok; overlap those waits
	c := StartCluster(t, 3)
	if got := len(c.Nodes()); got != 3 {
		t.Fatalf("len(Nodes()) = %d, want 3", got)
	}
	cc := c.Client(t)
	ctx := context.Background()
	const keys = 50
	for i := range keys {
		k := fmt.Sprintf("key-%d", i)
		if err := cc.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	for i := range keys {
		k := fmt.Sprintf("key-%d", i)
		if got, err := cc.Get(ctx, k).Int(); err != nil || got != i {
			t.Fatalf("GET %s = %d, %v; want %d, nil", k, got, err, i)
		}
	}
	// The keys fell into slots of every node, so every node served some.
	var total int64
	for _, n := range c.Nodes() {
		size := n.DBSize(t)
		if size == 0 {
			t.Errorf("node %s holds no keys; want the slots spread over all nodes", n.Addr())
		}
		total += size
	}
	if total != keys {
		t.Errorf("nodes hold %d keys in all, want %d", total, keys)
	}

	// A restarted node comes back empty but owning its slots.
	n0 := c.Nodes()[0]
	before := n0.DBSize(t)
	n0.Restart(t)
	c.WaitOK(t)
	if got := n0.DBSize(t); got != 0 {
		t.Errorf("restarted node holds %d keys, want 0", got)
	}
	missing := 0
	for i := range keys {
		if cc.Exists(ctx, fmt.Sprintf("key-%d", i)).Val() == 0 {
			missing++
		}
	}
	if int64(missing) != before {
		t.Errorf("after restarting node 0, %d keys are gone, want its %d", missing, before)
	}
}

func TestClusterOfOne(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, 1)
	cc := c.Client(t)
	if err := cc.Set(context.Background(), "{a}x", 1, 0).Err(); err != nil {
		t.Fatalf("SET on a one-node cluster: %v", err)
	}
}

func TestClusterWithReplicas(t *testing.T) {
	t.Parallel()
	c := StartClusterWithReplicas(t, 3, 1)
	cc := c.Client(t)
	ctx := context.Background()
	for i, m := range c.Nodes() {
		replicas := c.ReplicasOf(i)
		if len(replicas) != 1 {
			t.Fatalf("ReplicasOf(%d) has %d replicas, want 1", i, len(replicas))
		}
		_, masterPort, _ := strings.Cut(m.Addr(), ":")
		role, err := replicas[0].Client(t).Do(ctx, "ROLE").Slice()
		if err != nil || len(role) < 3 {
			t.Fatalf("ROLE on %s = %v, %v", replicas[0], role, err)
		}
		if role[0] != "slave" || fmt.Sprint(role[2]) != masterPort {
			t.Errorf("ROLE on replica %s = %v, want a replica of %s", replicas[0], role, m)
		}
	}
	// A write on any master reaches its replica.
	for i := range 20 {
		k := fmt.Sprintf("key-%d", i)
		master, err := cc.MasterForKey(ctx, k)
		if err != nil {
			t.Fatalf("MasterForKey(%q): %v", k, err)
		}
		conn := master.Conn()
		if err := conn.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		if err := awaitAck(ctx, conn, 1); err != nil {
			t.Errorf("SET %s: %v", k, err)
		}
		_ = conn.Close()
	}
	c.WaitOK(t)
}

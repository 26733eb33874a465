package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// MasterName is the name under which the sentinels of StartSentinel
// monitor the master; a failover client needs it.
const MasterName = "mymaster"

const (
	// sentinelDownAfter is how long the master must not answer before a
	// sentinel calls it down: short, so failover tests run in seconds.
	sentinelDownAfter = 500 * time.Millisecond
	// sentinelTimeout bounds the waits for replication to start, for the
	// sentinels to see the whole setup, and WaitMaster. Sentinels learn of
	// each other from hello messages sent every 2 s. A minute: a loaded
	// machine once kept a failover from completing within 20 s (each try
	// that fails waits out twice the failover timeout).
	sentinelTimeout = 60 * time.Second
)

// SentinelSetup is a master, one replica of it and the sentinels that
// watch them, all real redis-servers on loopback, started for a test and
// stopped when it ends. Restart brings each server back in the role it was
// started with (the replica as a replica of the first master's address);
// the sentinels then set the roles right again.
type SentinelSetup struct {
	master    *Server
	replica   *Server
	sentinels []*Server
}

// StartSentinel starts a master, a replica of it and n sentinels (1 or 3
// are usual) monitoring the master as MasterName with a quorum of a
// majority (n/2+1), down-after-milliseconds 500 and failover-timeout 2000.
// It returns once the replica is in sync and every sentinel knows the
// master, the replica and the other sentinels, so a failover can start as
// soon as the master dies (or fails t after 20 s).
//
// StartSentinel needs a real redis-server: without one it skips t, or fails
// it under PADLOCK_REQUIRE_REDIS=1. Under go test -short it skips t
// (SkipSlowDeployments).
func StartSentinel(t testing.TB, n int) *SentinelSetup {
	t.Helper()
	if n < 1 {
		t.Fatalf("redistest: StartSentinel needs n >= 1 sentinels, got %d", n)
	}
	SkipSlowDeployments(t, "a Sentinel deployment")
	holdHeavySlot(t)
	bin := requireBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), sentinelTimeout)
	defer cancel()

	// One at a time: the replica needs the master's port, the sentinels
	// need both servers up.
	master := startReal(t, []spec{{bin: bin, dir: t.TempDir(), data: true}}, false)[0]
	host, port, _ := strings.Cut(master.Addr(), ":")
	replica := startReal(t, []spec{{bin: bin, dir: t.TempDir(), data: true,
		args: []string{"--replicaof", host, port}}}, false)[0]
	if err := awaitReplication(ctx, replica); err != nil {
		t.Fatalf("redistest: replica %s of %s: %v", replica.Addr(), master.Addr(), err)
	}
	if err := awaitOnline(ctx, master, 1); err != nil {
		t.Fatalf("redistest: replica %s of %s: %v", replica.Addr(), master.Addr(), err)
	}

	conf := fmt.Sprintf("sentinel monitor %s %s %s %d\n"+
		"sentinel down-after-milliseconds %s %d\n"+
		"sentinel failover-timeout %s 2000\n",
		MasterName, host, port, n/2+1,
		MasterName, sentinelDownAfter.Milliseconds(),
		MasterName)
	specs := make([]spec, n)
	for i := range specs {
		dir := t.TempDir()
		// The sentinel rewrites this file with what it learns, so each
		// sentinel has its own, in its own directory.
		path := filepath.Join(dir, "sentinel.conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatalf("redistest: write sentinel config: %v", err)
		}
		specs[i] = spec{bin: bin, dir: dir, pre: []string{path, "--sentinel"}}
	}
	s := &SentinelSetup{master: master, replica: replica, sentinels: startReal(t, specs, false)}
	if err := s.awaitSentinels(ctx); err != nil {
		t.Fatalf("redistest: sentinels %v: %v", s.SentinelAddrs(), err)
	}
	return s
}

// awaitReplication waits until the replica reports its link to the master
// up, that is, the initial sync is done.
func awaitReplication(ctx context.Context, replica *Server) error {
	rdb := redis.NewClient(replica.Options())
	defer rdb.Close()
	want := map[string]string{"role": "slave", "master_link_status": "up"}
	var last string
	return poll(ctx, func() bool {
		info, err := rdb.Info(ctx, "replication").Result()
		if err != nil {
			last = err.Error()
			return false
		}
		last = info
		return infoHas(info, want)
	}, func() string { return "not in sync; INFO replication:\n" + last })
}

// awaitOnline waits until master counts n replicas online, those whose
// acks WAIT counts. The replica's side of the link is up a little before
// the master's: a write in between would wait for an ack that a replica
// still catching up does not send in time.
func awaitOnline(ctx context.Context, master *Server, n int) error {
	rdb := redis.NewClient(master.Options())
	defer rdb.Close()
	var got int64
	var last error
	return poll(ctx, func() bool {
		// WAIT with no write of its own counts the replicas online.
		got, last = rdb.Do(ctx, "WAIT", n, 50).Int64()
		return last == nil && got >= int64(n)
	}, func() string { return fmt.Sprintf("the master counts %d of %d replicas online (%v)", got, n, last) })
}

// awaitSentinels waits until every sentinel names the master, sees the
// replica as healthy and knows all other sentinels.
func (s *SentinelSetup) awaitSentinels(ctx context.Context) error {
	clients := s.sentinelClients()
	defer closeAll(clients)
	var last string
	return poll(ctx, func() bool {
		for _, sc := range clients {
			if err := s.sentinelReady(ctx, sc); err != nil {
				last = fmt.Sprintf("%s: %v", sc, err)
				return false
			}
		}
		return true
	}, func() string { return "setup not seen within " + sentinelTimeout.String() + "; " + last })
}

// sentinelReady says what one sentinel does not yet know, or nil.
func (s *SentinelSetup) sentinelReady(ctx context.Context, sc *redis.SentinelClient) error {
	addr, err := sc.GetMasterAddrByName(ctx, MasterName).Result()
	if err != nil {
		return err
	}
	if len(addr) != 2 || net.JoinHostPort(addr[0], addr[1]) != s.master.Addr() {
		return fmt.Errorf("master is %v, want %s", addr, s.master.Addr())
	}
	replicas, err := sc.Replicas(ctx, MasterName).Result()
	if err != nil {
		return err
	}
	healthy := false
	for _, r := range replicas {
		if net.JoinHostPort(r["ip"], r["port"]) == s.replica.Addr() &&
			r["flags"] == "slave" && r["master-link-status"] == "ok" {
			healthy = true
		}
	}
	if !healthy {
		return fmt.Errorf("replica %s not healthy yet; replicas: %v", s.replica.Addr(), replicas)
	}
	others, err := sc.Sentinels(ctx, MasterName).Result()
	if err != nil {
		return err
	}
	if len(others) != len(s.sentinels)-1 {
		return fmt.Errorf("knows %d other sentinels, want %d", len(others), len(s.sentinels)-1)
	}
	return nil
}

// Master returns the server started as the master. After a failover it
// may be down, or a replica of the new master; MasterAddr tells which
// server is master now.
func (s *SentinelSetup) Master() *Server { return s.master }

// Replica returns the server started as the replica, the one a failover
// promotes.
func (s *SentinelSetup) Replica() *Server { return s.replica }

// Sentinels returns the sentinel servers. They are Servers like the
// others: a test can kill or pause one too.
func (s *SentinelSetup) Sentinels() []*Server {
	return append([]*Server(nil), s.sentinels...)
}

// SentinelAddrs returns the sentinels' addresses.
func (s *SentinelSetup) SentinelAddrs() []string {
	addrs := make([]string, len(s.sentinels))
	for i, sn := range s.sentinels {
		addrs[i] = sn.Addr()
	}
	return addrs
}

// MasterAddr returns the master's address as the first sentinel that
// answers reports it, failing t if none does.
func (s *SentinelSetup) MasterAddr(t testing.TB) string {
	t.Helper()
	clients := s.sentinelClients()
	defer closeAll(clients)
	// Asked again until sentinelTimeout: on a loaded machine every
	// sentinel once missed its client's read timeout at once.
	ctx, cancel := context.WithTimeout(context.Background(), sentinelTimeout)
	defer cancel()
	for {
		var errs []error
		for _, sc := range clients {
			addr, err := sc.GetMasterAddrByName(ctx, MasterName).Result()
			if err == nil && len(addr) == 2 {
				return net.JoinHostPort(addr[0], addr[1])
			}
			errs = append(errs, fmt.Errorf("%s: %v", sc, err))
		}
		if ctx.Err() != nil {
			t.Fatalf("redistest: no sentinel names the master: %v", errors.Join(errs...))
			return ""
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitMaster waits until every sentinel that answers reports addr as the
// master, as after a failover to s.Replica().Addr(), and fails t if that
// takes longer than sentinelTimeout, not counting the time a sentinel
// spent in TILT mode (at most three times that in all). A failover after
// the master dies usually takes 1 to 3 s: 0.5 s to call it down, up to 1 s
// of random delay, then the promotion. A sentinel whose timer ran more
// than 2 s late (a starved process on a loaded machine) enters TILT and
// does nothing for 30 s, more than once in a row at times.
func (s *SentinelSetup) WaitMaster(t testing.TB, addr string) {
	t.Helper()
	clients := s.sentinelClients()
	defer closeAll(clients)
	ctx, cancel := context.WithTimeout(context.Background(), 3*sentinelTimeout)
	defer cancel()
	var last string
	soft := time.Now().Add(sentinelTimeout)
	err := poll(ctx, func() bool {
		if time.Now().After(soft) {
			if !tilted(ctx, clients) {
				cancel() // out of time, and no sentinel is in TILT
				return false
			}
			soft = time.Now().Add(time.Second)
		}
		answered := 0
		for _, sc := range clients {
			got, err := sc.GetMasterAddrByName(ctx, MasterName).Result()
			if err != nil {
				continue // a killed or paused sentinel has no say
			}
			answered++
			if len(got) != 2 || net.JoinHostPort(got[0], got[1]) != addr {
				last = fmt.Sprintf("%s reports %v", sc, got)
				return false
			}
		}
		last = "no sentinel answers"
		return answered > 0
	}, func() string { return "master not " + addr + " within " + sentinelTimeout.String() + "; " + last })
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
}

// WaitSettled waits until every sentinel that answers has named addr as a
// healthy master (flags exactly "master": not down, no failover under way)
// for a whole second, twice down-after, and fails t if that does not happen
// within 20 s.
//
// WaitMaster returns as soon as the sentinels agree on a new master; on a
// loaded machine one of them may still call that master down a moment
// later and fail over again, to whichever replica it sees, even an old
// master just restarted empty. A test that restarts the old master waits
// here first.
func (s *SentinelSetup) WaitSettled(t testing.TB, addr string) {
	t.Helper()
	clients := s.sentinelClients()
	defer closeAll(clients)
	ctx, cancel := context.WithTimeout(context.Background(), sentinelTimeout)
	defer cancel()
	var last string
	var since time.Time
	err := poll(ctx, func() bool {
		answered := 0
		for _, sc := range clients {
			m, err := sc.Master(ctx, MasterName).Result()
			if err != nil {
				continue // a killed or paused sentinel has no say
			}
			answered++
			if net.JoinHostPort(m["ip"], m["port"]) != addr || m["flags"] != "master" {
				last = fmt.Sprintf("%s reports %s:%s with flags %q", sc, m["ip"], m["port"], m["flags"])
				since = time.Time{}
				return false
			}
		}
		if answered == 0 {
			last = "no sentinel answers"
			since = time.Time{}
			return false
		}
		if since.IsZero() {
			since = time.Now()
		}
		last = "settled for " + time.Since(since).String()
		return time.Since(since) >= 2*sentinelDownAfter
	}, func() string {
		return "master " + addr + " not settled within " + sentinelTimeout.String() + "; " + last
	})
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
}

// FailoverOptions returns a new copy of the go-redis options Client uses:
// MasterName, every sentinel, and the timeouts and ContextTimeoutEnabled
// of Server.Options (1 s dial, read and write, 2 s pool, one dial
// attempt, no retries).
func (s *SentinelSetup) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:            MasterName,
		SentinelAddrs:         s.SentinelAddrs(),
		DialTimeout:           clientDialTimeout,
		DialerRetries:         1,
		ReadTimeout:           clientIOTimeout,
		WriteTimeout:          clientIOTimeout,
		PoolTimeout:           clientPoolTimeout,
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
	}
}

// Client returns a new go-redis failover client (redis.NewFailoverClient),
// which asks the sentinels for the master and follows failovers, made from
// FailoverOptions and then changed by each of opts in turn. It is closed
// when t ends, before the servers stop.
func (s *SentinelSetup) Client(t testing.TB, opts ...func(*redis.FailoverOptions)) *redis.Client {
	t.Helper()
	o := s.FailoverOptions()
	for _, f := range opts {
		f(o)
	}
	c := redis.NewFailoverClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// sentinelClients returns a client per sentinel; the caller closes them.
func (s *SentinelSetup) sentinelClients() []*redis.SentinelClient {
	clients := make([]*redis.SentinelClient, len(s.sentinels))
	for i, sn := range s.sentinels {
		o := sn.Options()
		// Short, so one paused sentinel does not stall every poll.
		o.ReadTimeout = 250 * time.Millisecond
		clients[i] = redis.NewSentinelClient(o)
	}
	return clients
}

// tilted reports whether a sentinel of clients is in TILT mode (INFO
// sentinel's sentinel_tilt:1).
func tilted(ctx context.Context, clients []*redis.SentinelClient) bool {
	for _, sc := range clients {
		cmd := redis.NewStringCmd(ctx, "info", "sentinel")
		if sc.Process(ctx, cmd) == nil && strings.Contains(cmd.Val(), "sentinel_tilt:1") {
			return true
		}
	}
	return false
}

func closeAll(clients []*redis.SentinelClient) {
	for _, c := range clients {
		_ = c.Close()
	}
}

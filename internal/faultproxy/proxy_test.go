package faultproxy_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/padlockgo/padlock/internal/faultproxy"
	"github.com/padlockgo/padlock/internal/redistest"
)

func TestMain(m *testing.M) {
	// The proxy refuses and resets dials on purpose.
	goleak.VerifyTestMain(m, redistest.DialProbe)
}

// readTimeout is the read timeout of the client through the proxy: long
// enough for a loaded machine to answer a command that meets no fault,
// and shorter by seconds than the delays the tests put in its way.
const readTimeout = 2 * time.Second

// delay is how long the delay tests hold requests and replies back.
const delay = 3 * readTimeout

// setup starts a real redis-server, a proxy in front of it, a client
// through the proxy (read timeout readTimeout, no retries) and one
// straight to the server, to see what the server really did.
func setup(t *testing.T) (p *faultproxy.Proxy, via, direct *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	if !srv.Real() {
		t.Skip("faultproxy tests need a real redis-server")
	}
	p, err := faultproxy.Start(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	// The direct client only looks: on a loaded machine its reply may
	// take longer than a test client's 1 s, which says nothing of what
	// the proxy did.
	direct = srv.Client(t, func(o *redis.Options) { o.ReadTimeout, o.WriteTimeout = 10*time.Second, 10*time.Second })
	via = srv.Client(t, func(o *redis.Options) {
		o.Addr = p.Addr()
		o.ReadTimeout = readTimeout
		o.PoolSize = 1
	})
	return p, via, direct
}

func get(t *testing.T, c *redis.Client, key string) string {
	t.Helper()
	v, err := c.Get(context.Background(), key).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

func TestForwards(t *testing.T) {
	p, via, direct := setup(t)
	ctx := context.Background()
	if err := via.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET through the proxy: %v", err)
	}
	if got := get(t, direct, "k"); got != "v" {
		t.Fatalf("server has k = %q, want %q", got, "v")
	}
	if got := get(t, via, "k"); got != "v" {
		t.Fatalf("GET through the proxy: got %q, want %q", got, "v")
	}
	if got := p.Dropped(); got != 0 {
		t.Fatalf("Dropped: got %d, want 0", got)
	}
}

// A dropped reply: the command ran, the client saw its connection break,
// and the next command works on a new connection.
func TestDropRepliesAfterTheServerActed(t *testing.T) {
	p, via, direct := setup(t)
	ctx := context.Background()
	if err := via.Ping(ctx).Err(); err != nil { // a pooled connection first
		t.Fatal(err)
	}
	p.DropReplies(1)
	if err := via.Incr(ctx, "n").Err(); err == nil {
		t.Fatalf("INCR whose reply was dropped: got nil error, want a broken connection")
	}
	if got := get(t, direct, "n"); got != "1" {
		t.Fatalf("server has n = %q, want %q: the command must have run", got, "1")
	}
	if got := p.Dropped(); got != 1 {
		t.Fatalf("Dropped: got %d, want 1", got)
	}
	if n, err := via.Incr(ctx, "n").Result(); err != nil || n != 2 {
		t.Fatalf("the next INCR: got %d, %v; want 2, nil", n, err)
	}
}

// DropRepliesTo loses only the reply of a matching request.
func TestDropRepliesTo(t *testing.T) {
	p, via, direct := setup(t)
	ctx := context.Background()
	if err := via.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.DropRepliesTo(1, []byte("target"))
	if err := via.Incr(ctx, "other").Err(); err != nil {
		t.Fatalf("INCR other (not matching): %v", err)
	}
	if err := via.Incr(ctx, "target").Err(); err == nil {
		t.Fatalf("INCR target (matching): got nil error, want its reply dropped")
	}
	if got := get(t, direct, "target"); got != "1" {
		t.Fatalf("server has target = %q, want %q", got, "1")
	}
	if got := p.Dropped(); got != 1 {
		t.Fatalf("Dropped: got %d, want 1", got)
	}
}

// A delayed reply past the client's read timeout: the client gives up on a
// command the server ran.
func TestDelayReplies(t *testing.T) {
	t.Parallel() // its own server and proxy
	p, via, direct := setup(t)
	ctx := context.Background()
	if err := via.Ping(ctx).Err(); err != nil { // the handshake undelayed
		t.Fatal(err)
	}
	p.DelayReplies(delay)
	if err := via.Incr(ctx, "n").Err(); err == nil {
		t.Fatalf("INCR with its reply delayed past the read timeout: got nil error, want a timeout")
	}
	if got := get(t, direct, "n"); got != "1" {
		t.Fatalf("server has n = %q, want %q", got, "1")
	}
	p.DelayReplies(0)
	if err := via.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after the delay ended: %v", err)
	}
}

// A delayed request reaches the server late: the client times out before
// the server has acted, and the server acts anyway.
func TestDelayRequests(t *testing.T) {
	t.Parallel() // its own server and proxy
	p, via, direct := setup(t)
	ctx := context.Background()
	if err := via.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.DelayRequests(delay)
	if err := via.Incr(ctx, "n").Err(); err == nil {
		t.Fatalf("INCR delayed past the read timeout: got nil error, want a timeout")
	}
	if got := get(t, direct, "n"); got != "" {
		t.Fatalf("server has n = %q right after the timeout, want it not yet set", got)
	}
	awaitValue(t, direct, "n", "1")
}

// While partitioned nothing passes; on heal what was held back is
// delivered, so the command the client gave up on runs late.
func TestPartition(t *testing.T) {
	p, via, direct := setup(t)
	ctx := context.Background()
	if err := via.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.Partition(true)
	if err := via.Incr(ctx, "n").Err(); err == nil {
		t.Fatalf("INCR across a partition: got nil error, want a timeout")
	}
	if got := get(t, direct, "n"); got != "" {
		t.Fatalf("server has n = %q during the partition, want nothing", got)
	}
	p.Partition(false)
	awaitValue(t, direct, "n", "1")
	if err := via.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after heal: %v", err)
	}
}

func TestRefuseAndReset(t *testing.T) {
	p, via, _ := setup(t)
	ctx := context.Background()
	if err := via.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if got := p.Conns(); got != 1 {
		t.Fatalf("Conns: got %d, want 1", got)
	}
	p.Refuse(true)
	if err := via.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING on a connection open before Refuse: %v", err)
	}
	p.Reset()
	if err := via.Ping(ctx).Err(); err == nil {
		t.Fatalf("PING on a reset connection: got nil error, want it broken")
	}
	if err := via.Ping(ctx).Err(); err == nil {
		t.Fatalf("PING on a new connection while refusing: got nil error, want it refused")
	}
	p.Refuse(false)
	// A new client: go-redis holds on to a failed dial's error for a while.
	fresh := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	defer fresh.Close()
	if err := fresh.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Refuse(false): %v", err)
	}
}

func awaitValue(t *testing.T, c *redis.Client, key, want string) {
	t.Helper()
	var got string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got = get(t, c, key); got == want {
			return
		}
	}
	t.Fatalf("server has %s = %q, want %q", key, got, want)
}

// Down: the proxy stops listening, so a dial is refused by the system
// and every open connection breaks; up again, it listens on the same
// address and forwards as before.
func TestDown(t *testing.T) {
	p, via, direct := setup(t)
	ctx := context.Background()
	if err := via.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	addr := p.Addr()
	if err := p.Down(true); err != nil {
		t.Fatal(err)
	}
	if err := via.Ping(ctx).Err(); err == nil {
		t.Fatal("PING on a connection open before Down: got nil error, want it broken")
	}
	var op *net.OpError
	if _, err := net.Dial("tcp", addr); !errors.As(err, &op) || op.Op != "dial" {
		t.Fatalf("dial while down: got %v, want the dial refused", err)
	}
	if err := p.Down(false); err != nil {
		t.Fatal(err)
	}
	if p.Addr() != addr {
		t.Fatalf("listening on %s after Down(false), want %s", p.Addr(), addr)
	}
	// A new client: go-redis holds on to a failed dial's error for a while.
	fresh := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer fresh.Close()
	if err := fresh.Set(ctx, "up", "1", 0).Err(); err != nil {
		t.Fatalf("SET through the proxy up again: %v", err)
	}
	if got := get(t, direct, "up"); got != "1" {
		t.Fatalf("server has up = %q, want %q", got, "1")
	}
}

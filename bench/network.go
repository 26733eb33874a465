package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// scNetwork measures the harness's own network: at each round-trip time
// of -rtt, a PING loop through the delay proxy (one connection, one PING
// at a time) from go-redis and from rueidis, and the time a message Redis
// pushes takes to reach a subscriber behind the proxy. It is what every
// other row at that round-trip time stands on.
const scNetwork = "network"

// pingsPerClient is how many PINGs each client sends per measurement.
const pingsPerClient = 400

// rttVariant names a row's variant at a round-trip time: loopback rows
// keep their name, so the loopback targets find them as before.
func rttVariant(variant string, rtt time.Duration) string {
	if rtt <= 0 {
		return variant
	}
	return strings.TrimPrefix(variant+", RTT "+rttLabel(rtt), ", ")
}

// rttLabel prints a round-trip time as the flags and the docs spell it.
func rttLabel(rtt time.Duration) string {
	if rtt <= 0 {
		return "0 (loopback)"
	}
	if rtt%time.Millisecond == 0 {
		return strconv.FormatInt(int64(rtt/time.Millisecond), 10) + "ms"
	}
	return strconv.FormatFloat(float64(rtt)/float64(time.Millisecond), 'f', -1, 64) + "ms"
}

// parseRTTs reads -rtt: comma-separated durations, 0 for loopback.
func parseRTTs(s string) ([]time.Duration, error) {
	var out []time.Duration
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if part == "0" {
			out = append(out, 0)
			continue
		}
		d, err := time.ParseDuration(part)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("bench: -rtt: %q is not a duration (e.g. 0,200us,1ms)", part)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench: -rtt: no round-trip time")
	}
	return out, nil
}

// runNetwork measures the network rows of every round-trip time.
func runNetwork(ctx context.Context, cfg *config) ([]result, error) {
	var out []result
	for _, rtt := range cfg.rtts {
		cfg.progress("network: PING at RTT %s", rttLabel(rtt))
		rs, err := measureNetwork(ctx, cfg, rtt)
		out = append(out, rs...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func measureNetwork(ctx context.Context, cfg *config, rtt time.Duration) ([]result, error) {
	servers, err := cfg.launcher.start(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer cfg.launcher.stop(servers[0])
	addr, direct := servers[0].addr, servers[0].addr
	var p *delayProxy
	if rtt > 0 {
		if p, err = startDelayProxy(addr, rtt); err != nil {
			return nil, err
		}
		defer p.close()
		addr = p.addr
	}
	return pingRows(ctx, addr, direct, rtt, rttVariant("", rtt), p)
}

// pingRows measures PING round trips to addr from go-redis and rueidis,
// and how long a message published on direct (undelayed, unless it is
// addr) takes to reach a subscriber on addr. setting is the round-trip
// time asked for (0: none known, as for -ping); p, if not nil, the proxy
// at addr, which says how late it wrote its chunks.
func pingRows(ctx context.Context, addr, direct string, setting time.Duration, variant string, p *delayProxy) ([]result, error) {
	proxyNote := func(r *result) {
		if p == nil {
			return
		}
		if m, err := p.mark(); err == nil && m.chunks > 0 {
			r.Extra = append(r.Extra, fmt.Sprintf("the proxy wrote its %d chunks late by p50 %v, p99 %v (the rest is the hosts' wake-ups and the extra hop)",
				m.chunks, us(m.lateP50), us(m.lateP99)))
		}
	}
	gr := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
	defer gr.Close()
	goRedis := result{Scenario: scNetwork, Library: "go-redis", Setup: "PING, one connection, one at a time", Variant: variant, Workers: 1}
	if err := pingLoop(ctx, &goRedis, func(ctx context.Context) error { return gr.Ping(ctx).Err() }, p); err != nil {
		return nil, err
	}
	proxyNote(&goRedis)
	push, err := pushLatency(ctx, gr, direct)
	if err != nil {
		return nil, err
	}
	_, p99, mean := percentiles(push)
	how := "PUBLISH on an undelayed connection, received by a subscriber through the network"
	if direct == addr {
		how = "PUBLISH and the subscriber on the same network: a request's way there and a push's way back"
	}
	goRedis.Extra = append(goRedis.Extra, fmt.Sprintf("a pushed message (%s): mean %v, p50 %v, p99 %v",
		how, us(mean), us(median(push)), us(p99)))

	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return nil, fmt.Errorf("bench: rueidis client: %w", err)
	}
	defer rc.Close()
	rue := result{Scenario: scNetwork, Library: "rueidis", Setup: "PING, one at a time", Variant: variant, Workers: 1}
	if err := pingLoop(ctx, &rue, func(ctx context.Context) error { return rc.Do(ctx, rc.B().Ping().Build()).Error() }, p); err != nil {
		return nil, err
	}
	proxyNote(&rue)
	out := []result{goRedis, rue}
	for i := range out {
		r := &out[i]
		r.RTT = setting
		if setting > 0 {
			r.Extra = append([]string{fmt.Sprintf("vs the %s setting: mean +%v, p50 +%v, p99 +%v",
				rttLabel(setting), us(r.Mean-setting), us(r.P50-setting), us(r.P99-setting))}, r.Extra...)
		}
	}
	if setting > 0 {
		out[0].Extra = append(out[0].Extra, fmt.Sprintf("half the setting: %v", us(setting/2)))
	}
	return out, nil
}

// pingLoop times pingsPerClient calls of ping, one after another, into r,
// after marking p (if not nil) so its next mark covers them.
func pingLoop(ctx context.Context, r *result, ping func(context.Context) error, p *delayProxy) error {
	for range 20 { // connect and warm up
		if err := ping(ctx); err != nil {
			return fmt.Errorf("bench: PING: %w", err)
		}
	}
	if p != nil {
		if _, err := p.mark(); err != nil {
			return err
		}
	}
	lat := make([]time.Duration, 0, pingsPerClient)
	t0 := time.Now()
	for range pingsPerClient {
		t := time.Now()
		if err := ping(ctx); err != nil {
			return fmt.Errorf("bench: PING: %w", err)
		}
		lat = append(lat, time.Since(t))
	}
	r.Seconds = time.Since(t0).Seconds()
	r.Ops = int64(len(lat))
	r.OpsPerSec = float64(r.Ops) / r.Seconds
	r.RoundTripsOp = 1
	r.P50, r.P99, r.Mean = percentiles(lat)
	return nil
}

// pushLatency publishes on an undelayed connection to direct and times
// each message's arrival at a subscriber of sub's server.
func pushLatency(ctx context.Context, sub *redis.Client, direct string) ([]time.Duration, error) {
	pub := redis.NewClient(&redis.Options{Addr: direct, PoolSize: 1})
	defer pub.Close()
	ps := sub.Subscribe(ctx, "bench:network")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		return nil, fmt.Errorf("bench: SUBSCRIBE: %w", err)
	}
	var lat []time.Duration
	for i := range 200 {
		t := time.Now()
		if err := pub.Publish(ctx, "bench:network", strconv.Itoa(i)).Err(); err != nil {
			return nil, fmt.Errorf("bench: PUBLISH: %w", err)
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		msg, err := ps.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("bench: pushed message: %w", err)
		}
		if msg.Payload != strconv.Itoa(i) {
			return nil, fmt.Errorf("bench: pushed message %q, want %d", msg.Payload, i)
		}
		lat = append(lat, time.Since(t))
	}
	return lat, nil
}

func median(lat []time.Duration) time.Duration {
	p50, _, _ := percentiles(lat)
	return p50
}

// runPing is -ping: the network rows against a server someone else runs
// (on a link with tc netem, say), with no delay of the harness's own.
func runPing(ctx context.Context, addr string) ([]result, error) {
	return pingRows(ctx, addr, addr, 0, "at "+addr, nil)
}

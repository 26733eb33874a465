package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// libEtcd is etcd's concurrency.Mutex on one embedded etcd member: not a
// Redis lock, and never one of the peers padlock's targets are set
// against. Its rows are measured beside them for reference, on the same
// load.
const libEtcd = "etcd (embedded, one member, fsync on)"

// etcdMemberFlag is the hidden flag that runs this program as the etcd
// member.
const etcdMemberFlag = "-etcd-member"

// etcdSpec is one etcd row: clients (each a clientv3.Client, one gRPC
// connection) and whether every worker has a session of its own or each
// client has one, shared by its workers in turn.
type etcdSpec struct {
	setup     string
	procs     int
	perWorker bool
}

func etcdCases(cfg *config) []etcdSpec {
	if !cfg.wantLib(libEtcd) || cfg.skipPeers {
		return nil
	}
	procs := cfg.procs
	return []etcdSpec{
		{fmt.Sprintf("concurrency.Mutex, %d clients, 1 session each (60s TTL), wait %v", procs, cfg.wait), procs, false},
		{fmt.Sprintf("concurrency.Mutex, %d clients, 1 session per worker (60s TTL), wait %v", procs, cfg.wait), procs, true},
	}
}

// onFreshEtcd starts an etcd member, builds the row's clients and
// sessions on it, measures wl, and stops the member.
func onFreshEtcd(ctx context.Context, cfg *config, scenario string, c etcdSpec, wl workload) (result, error) {
	settleBeforeRow(ctx, cfg)
	m, err := startEtcdMember(ctx)
	if err != nil {
		return result{}, err
	}
	defer m.stop()
	hook := &roundTrips{}
	clients := make([]*clientv3.Client, max(c.procs, 1))
	defer func() {
		for _, cl := range clients {
			if cl != nil {
				cl.Close()
			}
		}
	}()
	for i := range clients {
		if clients[i], err = newEtcdClient(m.addr, hook); err != nil {
			return result{}, err
		}
	}
	sessions := len(clients)
	if c.perWorker {
		sessions = wl.workers
	}
	lib, err := newEtcdLib(ctx, clients, sessions, cfg.wait)
	if err != nil {
		return result{}, err
	}
	r, err := measure(ctx, lib, hook, &sampler{member: m}, wl)
	lib.close()
	if err != nil {
		return result{}, fmt.Errorf("%s %s %s: %w", scenario, libEtcd, c.setup, err)
	}
	r.Scenario, r.Library, r.Setup, r.Reference, r.Procs = scenario, libEtcd, c.setup, true, max(c.procs, 1)
	return r, nil
}

// newEtcdClient connects to the member on addr, counting each gRPC
// request in h: a unary call is one, and so is each message sent on a
// stream (a watch's create and cancel, a lease keep-alive). Opening a
// stream is tallied by name but not counted: its headers go out with its
// first message. Events the member sends on a watch are not requests, as
// pub/sub messages are not on Redis.
func newEtcdClient(addr string, h *roundTrips) (*clientv3.Client, error) {
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{addr},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				h.count(grpcMethod(method))
				return invoker(ctx, method, req, reply, cc, opts...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				s, err := streamer(ctx, desc, cc, method, opts...)
				if err != nil {
					return nil, err
				}
				h.tally(grpcMethod(method) + " stream opened") // its first message is the request
				return &countingStream{ClientStream: s, h: h, name: grpcMethod(method)}, nil
			}),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("bench: etcd client: %w", err)
	}
	return c, nil
}

// grpcMethod shortens "/etcdserverpb.KV/Txn" to "Txn".
func grpcMethod(full string) string {
	return full[strings.LastIndex(full, "/")+1:]
}

// countingStream counts the messages a client sends on a stream.
type countingStream struct {
	grpc.ClientStream
	h    *roundTrips
	name string
}

func (s *countingStream) SendMsg(m any) error {
	s.h.count(s.name)
	return s.ClientStream.SendMsg(m)
}

// etcdLib takes locks through concurrency.Mutex, a fresh Mutex per
// acquisition on a long-lived session. A Mutex's key is the lock's
// prefix and its session's lease, and a session that finds its key there
// already takes the lock as its own (etcd lets a session re-take a lock it
// holds): two goroutines of one session would both hold it. So the workers
// of a session take turns for it first, in arrival order; with a session
// per worker there is no one to take turns with.
type etcdLib struct {
	sessions []*etcdSession // worker w uses sessions[w % len]
	wait     time.Duration
}

type etcdSession struct {
	s    *concurrency.Session
	turn chan struct{} // holds one token: the session's turn
}

// newEtcdLib opens n sessions (the default 60 s TTL, kept alive by the
// client), session i on client i mod len(clients), so that worker w's
// session is on client w mod len(clients), as the other rows' workers are.
func newEtcdLib(ctx context.Context, clients []*clientv3.Client, n int, wait time.Duration) (*etcdLib, error) {
	e := &etcdLib{wait: wait}
	for i := range n {
		s, err := concurrency.NewSession(clients[i%len(clients)], concurrency.WithContext(ctx))
		if err != nil {
			e.close()
			return nil, fmt.Errorf("bench: etcd session: %w", err)
		}
		turn := make(chan struct{}, 1)
		turn <- struct{}{}
		e.sessions = append(e.sessions, &etcdSession{s: s, turn: turn})
	}
	return e, nil
}

func (e *etcdLib) acquire(ctx context.Context, w int, key string) (releaseFunc, error) {
	s := e.sessions[w%len(e.sessions)]
	wctx, cancel := context.WithTimeout(ctx, e.wait)
	defer cancel()
	gaveUp := func(err error) error {
		if wctx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("%w: %v", errGaveUp, err)
		}
		return err
	}
	select {
	case <-s.turn:
	case <-wctx.Done():
		return nil, gaveUp(wctx.Err())
	}
	m := concurrency.NewMutex(s.s, key)
	if err := m.Lock(wctx); err != nil { // Lock deletes its key when the wait ends
		s.turn <- struct{}{}
		return nil, gaveUp(err)
	}
	return func(ctx context.Context) error {
		err := m.Unlock(ctx)
		s.turn <- struct{}{}
		return err
	}, nil
}

func (e *etcdLib) close() {
	for _, s := range e.sessions {
		s.s.Close() // revokes the lease
	}
}

// ---- the member ---------------------------------------------------------

// etcdMember is one etcd member (go.etcd.io/etcd/server/v3/embed) run in
// a process of its own, this program run again with etcdMemberFlag, as a
// redis-server is: its CPU is measured apart from the clients', and its
// garbage collection does not stop them. It listens on loopback, keeps
// its data in a temp dir removed by stop, and fsyncs its write-ahead log
// on every write, as etcd does unless told not to.
type etcdMember struct {
	addr   string // host:port of the client URL
	dir    string
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	exited chan struct{}
}

// startEtcdMember starts a member and returns once it serves clients,
// trying other ports if another process took the ones it chose.
func startEtcdMember(ctx context.Context) (*etcdMember, error) {
	var lastErr error
	for range launchAttempts {
		m, err := launchEtcdMember(ctx)
		if err == nil {
			return m, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func launchEtcdMember(ctx context.Context) (*etcdMember, error) {
	clientPort, err := freePort()
	if err != nil {
		return nil, err
	}
	peerPort, err := freePort()
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "padlock-bench-etcd-")
	if err != nil {
		return nil, fmt.Errorf("bench: temp dir: %w", err)
	}
	errPath := filepath.Join(dir, "stderr.log")
	errFile, err := os.Create(errPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("bench: etcd member log: %w", err)
	}
	defer errFile.Close()
	cmd := exec.Command(exe, etcdMemberFlag, dir, strconv.Itoa(clientPort), strconv.Itoa(peerPort))
	cmd.Stderr = errFile
	cmd.SysProcAttr = procAttr()
	in, err := cmd.StdinPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("bench: start etcd member: %w", err)
	}
	m := &etcdMember{addr: "127.0.0.1:" + strconv.Itoa(clientPort), dir: dir, cmd: cmd, in: in, out: bufio.NewScanner(out), exited: make(chan struct{})}
	ready := make(chan bool, 1)
	go func() { ready <- m.out.Scan() && m.out.Text() == "ready" }()
	fail := func(err error) (*etcdMember, error) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		log, _ := os.ReadFile(errPath)
		etcdLog, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%w; member output:\n%s\n%s", err, tail(string(log), 10), tail(string(etcdLog), 10))
	}
	select {
	case ok := <-ready:
		if !ok {
			return fail(errors.New("bench: etcd member exited at start"))
		}
	case <-time.After(30 * time.Second):
		return fail(errors.New("bench: etcd member not ready after 30s"))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	go func() {
		_ = cmd.Wait()
		close(m.exited)
	}()
	return m, nil
}

// stats returns the member's CPU so far, the Raft entries it has applied
// and the fsyncs of its write-ahead log.
func (m *etcdMember) stats() (serverStats, error) {
	if _, err := io.WriteString(m.in, "\n"); err != nil {
		return serverStats{}, fmt.Errorf("bench: etcd member: %w", err)
	}
	if !m.out.Scan() {
		return serverStats{}, fmt.Errorf("bench: etcd member: no answer (%v)", m.out.Err())
	}
	var cpu, applied, fsyncs int64
	if _, err := fmt.Sscan(m.out.Text(), &cpu, &applied, &fsyncs); err != nil {
		return serverStats{}, fmt.Errorf("bench: etcd member: %q: %w", m.out.Text(), err)
	}
	return serverStats{cpu: time.Duration(cpu), raftEntries: applied, fsyncs: fsyncs}, nil
}

// stop ends the member (it closes its server at the end of its input),
// kills it if it has not exited within 10 s, and removes its data.
func (m *etcdMember) stop() {
	m.in.Close()
	select {
	case <-m.exited:
	case <-time.After(10 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
	os.RemoveAll(m.dir)
}

// runEtcdMember is the member's process: a single-member cluster on
// 127.0.0.1 with its data under dir, every other setting embed's default
// (among them fsync of the write-ahead log on every write, a 100 ms tick,
// no auto-compaction). It prints "ready" once it serves clients and, for
// each line it reads, "CPU-ns applied-index WAL-fsyncs"; it ends at the
// end of its input.
func runEtcdMember(dir, clientPort, peerPort string) int {
	cfg := embed.NewConfig()
	cfg.Name = "bench"
	cfg.Dir = filepath.Join(dir, "data")
	cfg.Logger = "zap"
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{filepath.Join(dir, "etcd.log")}
	cu := url.URL{Scheme: "http", Host: "127.0.0.1:" + clientPort}
	pu := url.URL{Scheme: "http", Host: "127.0.0.1:" + peerPort}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench etcd member:", err)
		return 1
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "bench etcd member:", err)
		return 1
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "bench etcd member: not ready after 30s")
		return 1
	}
	var fatal atomic.Pointer[error]
	go func() {
		if err, ok := <-e.Err(); ok && err != nil {
			fatal.Store(&err)
		}
	}()
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if err := fatal.Load(); err != nil {
			fmt.Fprintln(os.Stderr, "bench etcd member:", *err)
			return 1
		}
		fmt.Println(int64(processCPU()), e.Server.AppliedIndex(), walFsyncs())
	}
	return 0
}

// walFsyncs is how many times the member has fsynced its write-ahead log:
// the count of etcd's etcd_disk_wal_fsync_duration_seconds histogram.
func walFsyncs() uint64 {
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() == "etcd_disk_wal_fsync_duration_seconds" {
			var n uint64
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
			return n
		}
	}
	return 0
}

// etcdVersions names the etcd modules this program was built with.
func etcdVersions() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "etcd"
	}
	var parts []string
	for _, d := range bi.Deps {
		if d.Path == "go.etcd.io/etcd/client/v3" || d.Path == "go.etcd.io/etcd/server/v3" {
			parts = append(parts, strings.TrimPrefix(d.Path, "go.etcd.io/etcd/")+" "+d.Version)
		}
	}
	return "etcd " + strings.Join(parts, ", ")
}

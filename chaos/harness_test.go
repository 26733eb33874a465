//go:build chaos

package chaos_test

import (
	"cmp"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/padlockgo/padlock/chaos/internal/fenced"
	"github.com/padlockgo/padlock/chaos/internal/record"
	"github.com/padlockgo/padlock/internal/faultproxy"
	"github.com/padlockgo/padlock/internal/redistest"
)

// binaries are built once per test process, into one temp dir removed at
// exit (see TestMain).
var (
	binDir   string
	binMu    sync.Mutex
	binBuilt = map[string]string{}
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "padlock-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// build compiles the main package pkg (an import path) once per test run
// and returns the binary's path.
func build(t *testing.T, pkg string) string {
	t.Helper()
	binMu.Lock()
	defer binMu.Unlock()
	if bin, ok := binBuilt[pkg]; ok {
		return bin
	}
	bin := filepath.Join(binDir, filepath.Base(pkg))
	start := time.Now()
	out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	t.Logf("built %s in %v", pkg, time.Since(start).Round(time.Millisecond))
	binBuilt[pkg] = bin
	return bin
}

// env is one run of one scenario: the Redis servers, the fenced store, the
// worker processes and their records.
type env struct {
	t   *testing.T
	sc  scenario
	bin string
	dir string

	store    *fenced.Store
	storeURL string

	servers  []*redistest.Server      // single and redlock modes; cluster: the masters
	sentinel *redistest.SentinelSetup // sentinel mode
	addrs    string                   // what workers get as -addrs
	keys     []string                 // the lock keys; cluster: one per master, in order

	mu      sync.Mutex
	procs   map[int]*proc
	nextID  int
	died    map[int]int64             // workers killed, and when
	faults  int                       // faults that hit a holder inside its critical section
	caught  []caught                  // the holders those faults hit, where known
	proxies map[int]*faultproxy.Proxy // each process's path to Redis, with sc.proxy
	windows []record.Window           // where the faults allow two locks to report held
}

// proc is one worker process.
type proc struct {
	id     int
	cmd    *exec.Cmd
	out    string
	exited chan struct{}
}

func newEnv(t *testing.T, sc scenario) *env {
	t.Helper()
	e := &env{t: t, sc: sc, bin: build(t, "github.com/padlockgo/padlock/chaos/internal/worker"),
		dir: t.TempDir(), procs: map[int]*proc{}, died: map[int]int64{}, nextID: 1,
		proxies: map[int]*faultproxy.Proxy{}}
	e.store = fenced.NewStore()
	srv := httptest.NewServer(e.store) // 127.0.0.1 only
	t.Cleanup(srv.Close)
	e.storeURL = srv.URL

	switch sc.mode {
	case "single":
		e.servers = redistest.StartN(t, 1)
		e.addrs = e.servers[0].Addr()
	case "redlock":
		e.servers = redistest.StartN(t, 3)
		addrs := make([]string, len(e.servers))
		for i, s := range e.servers {
			addrs[i] = s.Addr()
		}
		e.addrs = strings.Join(addrs, ",")
		// A node votes once it has been up for the max lease (the TTL
		// here) and a second or two more: uptime comes in whole seconds.
		time.Sleep(sc.ttl + 2*time.Second)
	case "sentinel":
		e.sentinel = redistest.StartSentinel(t, 3)
		e.addrs = strings.Join(e.sentinel.SentinelAddrs(), ",")
	case "cluster":
		c := redistest.StartCluster(t, 3)
		e.servers = c.Nodes()
		e.addrs = strings.Join(c.Addrs(), ",")
		e.keys = clusterKeys(t, c)
	default:
		t.Fatalf("scenario %s: unknown mode %q", sc.name, sc.mode)
	}
	if e.keys == nil {
		e.keys = []string{"chaos"}
	}
	for _, s := range e.servers {
		if !s.Real() {
			t.Skip("the chaos suite needs a real redis-server (PADLOCK_REQUIRE_REDIS=1 makes this a failure)")
		}
	}
	// Workers are stopped before the servers (cleanups run last first).
	t.Cleanup(e.killAll)
	return e
}

// clusterKeys returns one lock key per master of c, in the order of
// c.Nodes(), and lets every master serve its slots while another is down
// (cluster-require-full-coverage no), as a cluster with replicas would
// once it failed over: a slow master must not take the others down.
func clusterKeys(t *testing.T, c *redistest.Cluster) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	index := map[string]int{}
	for i, n := range c.Nodes() {
		index[n.Addr()] = i
		if err := n.Client(t).ConfigSet(ctx, "cluster-require-full-coverage", "no").Err(); err != nil {
			t.Fatalf("%s: CONFIG SET cluster-require-full-coverage no: %v", n.Addr(), err)
		}
	}
	cc := c.Client(t)
	keys := make([]string, len(index))
	for n, found := 0, 0; found < len(keys); n++ {
		if n > 1000 {
			t.Fatalf("no key for every master among 1000: %v", keys)
		}
		key := fmt.Sprintf("k%d", n) // the lock's Redis key hashes on it: padlock:{kN}
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatalf("MasterForKey(%q): %v", key, err)
		}
		if i, ok := index[m.Options().Addr]; ok && keys[i] == "" {
			keys[i] = key
			found++
		}
	}
	return keys
}

// start starts one worker and returns its id.
func (e *env) start() int {
	e.t.Helper()
	e.mu.Lock()
	id := e.nextID
	e.nextID++
	e.mu.Unlock()

	sc := e.sc
	addrs := e.addrs
	if sc.proxy {
		// Its own proxy, so that a fault can single out one process.
		p, err := faultproxy.Start(e.servers[0].Addr())
		if err != nil {
			e.t.Fatalf("worker %d: %v", id, err)
		}
		e.t.Cleanup(func() { _ = p.Close() })
		e.mu.Lock()
		e.proxies[id] = p
		e.mu.Unlock()
		addrs = p.Addr()
	}
	wait := sc.wait
	if wait == 0 {
		wait = 5 * sc.ttl
	}
	out := filepath.Join(e.dir, fmt.Sprintf("worker-%d.jsonl", id))
	args := []string{
		"-id", strconv.Itoa(id), "-mode", sc.mode, "-addrs", addrs, "-key", strings.Join(e.keys, ","),
		"-ttl", sc.ttl.String(), "-hold", sc.hold.String(), "-wait", wait.String(),
		"-duration", "2m", "-iterations", "10000",
		"-store", e.storeURL, "-out", out,
		"-check-ctx=" + strconv.FormatBool(!sc.unchecked),
		"-spin", strconv.Itoa(sc.spin),
		"-replica-ack", strconv.Itoa(sc.replicaAck),
		"-goroutines", strconv.Itoa(max(sc.goroutines, 1)),
		"-fair=" + strconv.FormatBool(sc.fair),
		"-redis-retries", strconv.Itoa(cmp.Or(sc.redisRetries, -1)),
		"-extend", sc.extends,
		"-primitive", cmp.Or(sc.primitive, "lock"), "-permits", strconv.Itoa(sc.permits), "-reads", strconv.Itoa(sc.reads),
	}
	cmd := exec.Command(e.bin, args...)
	cmd.Env = os.Environ()
	if sc.spin > 0 {
		cmd.Env = append(cmd.Env, "GOMAXPROCS=1")
	}
	logf, err := os.Create(filepath.Join(e.dir, fmt.Sprintf("worker-%d.log", id)))
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		e.t.Fatalf("start worker %d: %v", id, err)
	}
	p := &proc{id: id, cmd: cmd, out: out, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	e.mu.Lock()
	e.procs[id] = p
	e.mu.Unlock()
	return id
}

// proc returns the process of worker id: a process's goroutines record
// under ids that differ by multiples of record.GoroutineStride.
func (e *env) proc(id int) *proc {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.procs[id%record.GoroutineStride]
}

// stop asks every worker to finish its iteration and exit (SIGTERM), waits
// up to timeout, and kills the ones still running.
func (e *env) stop(timeout time.Duration) {
	procs := e.all()
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(timeout)
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-deadline:
			e.t.Errorf("worker %d did not exit within %v of SIGTERM; killing it (its log: %s)", p.id, timeout, e.logTail(p.id))
			e.kill(p.id)
		}
	}
}

// kill sends SIGKILL to worker id and waits for it to be gone. Its
// critical section, if it was in one, ends at that moment.
func (e *env) kill(id int) {
	p := e.proc(id)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	<-p.exited
	now := record.Now()
	e.mu.Lock()
	for g := range max(e.sc.goroutines, 1) { // every worker of the process
		e.died[p.id+g*record.GoroutineStride] = now
	}
	e.mu.Unlock()
}

// all returns every worker started, in id order.
func (e *env) all() []*proc {
	e.mu.Lock()
	defer e.mu.Unlock()
	procs := make([]*proc, 0, len(e.procs))
	for _, p := range e.procs {
		procs = append(procs, p)
	}
	slices.SortFunc(procs, func(a, b *proc) int { return a.id - b.id })
	return procs
}

func (e *env) killAll() {
	for _, p := range e.all() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			<-p.exited
		}
	}
}

// pause stops worker id with SIGSTOP and returns once it is stopped.
func (e *env) pause(id int) {
	p := e.proc(id)
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		e.t.Fatalf("SIGSTOP worker %d: %v", id, err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
		if err != nil {
			return // not Linux, or gone: nothing better to wait for
		}
		// pid (comm) state ...; comm may hold spaces, state follows the last ')'.
		if s := string(b); strings.LastIndexByte(s, ')') > 0 {
			if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 0 && f[0] == "T" {
				return
			}
		}
	}
}

func (e *env) resume(id int) {
	_ = e.proc(id).cmd.Process.Signal(syscall.SIGCONT)
}

// events returns every worker's record so far.
func (e *env) events() []record.Event {
	e.t.Helper()
	var all []record.Event
	for _, p := range e.all() {
		evs, err := record.ReadFile(p.out)
		if err != nil && !os.IsNotExist(err) {
			e.t.Fatalf("worker %d record: %v", p.id, err)
		}
		all = append(all, evs...)
	}
	return all
}

// holding returns the workers inside a critical section according to evs:
// a section starts at Acquire and ends at Release or Lost. With since > 0,
// only sections whose Acquire returned after since count.
func holding(evs []record.Event, since int64) []int {
	in := map[int]bool{}
	for _, ev := range evs {
		switch ev.Kind {
		case record.Acquire:
			in[ev.Worker] = ev.T > since
		case record.Release, record.Lost:
			in[ev.Worker] = false
		}
	}
	var ids []int
	for id, ok := range in {
		if ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// awaitHolder waits up to timeout for a live worker to be inside a critical
// section that it entered by an Acquire that returned after since, and
// returns it (0 if none came).
func (e *env) awaitHolder(since int64, timeout time.Duration) int {
	e.t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		for _, id := range holding(e.events(), since) {
			if e.alive(id) {
				return id
			}
		}
	}
	return 0
}

func (e *env) alive(id int) bool {
	select {
	case <-e.proc(id).exited:
		return false
	default:
		return true
	}
}

// stillHolding reports whether worker id was still inside its critical
// section at time at: its record shows no Release or Lost before at since
// its last Acquire before at.
func (e *env) stillHolding(id int, at int64) bool {
	in := false
	for _, ev := range e.events() {
		if ev.Worker != id || ev.T > at {
			continue
		}
		switch ev.Kind {
		case record.Acquire:
			in = true
		case record.Release, record.Lost:
			in = false
		}
	}
	return in
}

// proxy returns the fault proxy between worker id's process and Redis.
func (e *env) proxy(id int) *faultproxy.Proxy {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.proxies[id%record.GoroutineStride]
}

// window records a span in which the fault just injected allows a lock
// granted before from to go on reporting held while another does.
func (e *env) window(name string, from, to int64, proc int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.windows = append(e.windows, record.Window{Name: name, From: from, To: to, GrantedBefore: from, Proc: proc})
}

// hit counts a fault that caught a holder inside its critical section.
func (e *env) hit() {
	e.mu.Lock()
	e.faults++
	e.mu.Unlock()
}

// caught is a holder a fault hit inside its critical section: worker id,
// at the moment at; took is when the fault had surely taken hold (a
// SIGSTOP seen in /proc): a section that ended by then, its record not
// yet written when the harness looked, was not caught.
type caught struct {
	id       int
	at, took int64
}

// hitHolder counts a fault that caught worker id inside its critical
// section at the moment at, in effect by took, and remembers whom it
// caught.
func (e *env) hitHolder(id int, at, took int64) {
	e.mu.Lock()
	e.faults++
	e.caught = append(e.caught, caught{id: id, at: at, took: took})
	e.mu.Unlock()
}

func (e *env) logTail(id int) string {
	b, _ := os.ReadFile(filepath.Join(e.dir, fmt.Sprintf("worker-%d.log", id%record.GoroutineStride)))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

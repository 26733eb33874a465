package redistest

import (
	"flag"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Spare servers are redis-servers a test binary starts as it begins,
// before any test asks for one, for the tests that need servers that have
// been up a while: a Redlock node votes only once it has surely been up
// for the max lease, which costs a freshly started node seconds. Such a
// test takes spares with StartAged instead of sleeping.
var spares struct {
	mu      sync.Mutex
	free    []*Server // oldest first
	started sync.WaitGroup
	stopped bool
}

// Runner is what a TestMain runs: *testing.M, or what wraps it.
type Runner interface{ Run() int }

type withSpares struct {
	m Runner
	n int
}

// WithSpares returns m, run with n spare servers started in the background
// as it begins and stopped once it ends, for StartAged to take. For a
// TestMain:
//
//	goleak.VerifyTestMain(redistest.WithSpares(m, 24), redistest.DialProbe)
//
// Without redis-server on PATH it starts none, and StartAged starts
// servers (or the fallback) as StartN does.
func WithSpares(m Runner, n int) Runner { return withSpares{m, n} }

func (w withSpares) Run() int {
	startSpares(w.n)
	defer stopSpares()
	return w.m.Run()
}

// startSpares starts n spare servers, a few at a time so as not to crowd
// the first tests, adding each to the free list once it answers.
func startSpares(n int) {
	bin, err := findRedisServer()
	if err != nil || n < 1 {
		return
	}
	spares.started.Go(func() {
		const atOnce = 4
		for left := n; left > 0; left -= atOnce {
			specs := make([]spec, min(left, atOnce))
			ports, err := freePorts(len(specs), false)
			if err != nil {
				return
			}
			var wg sync.WaitGroup
			for i := range specs {
				dir, err := os.MkdirTemp("", "redistest-spare-")
				if err != nil {
					return
				}
				specs[i] = spec{bin: bin, dir: dir, data: true, port: ports[i]}
				wg.Go(func() {
					s, err := startProc(specs[i], false)
					spares.mu.Lock()
					defer spares.mu.Unlock()
					if err != nil || spares.stopped {
						if s != nil {
							_ = s.proc.kill()
						}
						_ = os.RemoveAll(specs[i].dir)
						return
					}
					spares.free = append(spares.free, s)
				})
			}
			wg.Wait()
			spares.mu.Lock()
			stopped := spares.stopped
			spares.mu.Unlock()
			if stopped {
				return
			}
		}
	})
}

// stopSpares stops the spares no test took.
func stopSpares() {
	spares.mu.Lock()
	spares.stopped = true
	spares.mu.Unlock()
	spares.started.Wait()
	spares.mu.Lock()
	defer spares.mu.Unlock()
	for _, s := range spares.free {
		if s.proc != nil {
			_ = s.proc.kill()
		}
		_ = os.RemoveAll(s.sp.dir)
	}
	spares.free = nil
}

// StartAged returns n independent Redis servers for t, as StartN does,
// that have each been up for at least age: spares that WithSpares started
// as the binary began when there are enough, else servers started now,
// waited for. It fails or skips t as StartN does.
func StartAged(t testing.TB, n int, age time.Duration) []*Server {
	t.Helper()
	if n < 1 {
		t.Fatalf("redistest: StartAged needs n >= 1, got %d", n)
	}
	servers := takeSpares(t, n)
	if len(servers) < n {
		servers = append(servers, StartN(t, n-len(servers))...)
	}
	var youngest time.Time
	for _, s := range servers {
		up := time.Now() // the fallback: counted from now
		if s.proc != nil {
			up = s.proc.ready
		}
		if up.After(youngest) {
			youngest = up
		}
	}
	time.Sleep(time.Until(youngest.Add(age)))
	return servers
}

// takeSpares takes up to n spares for t, which stops them when it ends.
func takeSpares(t testing.TB, n int) []*Server {
	spares.mu.Lock()
	k := min(n, len(spares.free))
	taken := append([]*Server(nil), spares.free[:k]...)
	spares.free = spares.free[k:]
	spares.mu.Unlock()
	for _, s := range taken {
		t.Cleanup(func() {
			s.shutdown(t)
			_ = os.RemoveAll(s.sp.dir)
		})
	}
	return taken
}

// SideBySide sets the test binary's -parallel to n unless its command line
// set it: for a package whose parallel tests mostly wait on servers of
// their own (to start, to fail over, to time out, for a lease), more of
// them at once than go test's default (the number of CPUs) cuts its time
// without crowding the CPUs. Clusters and Sentinel deployments still run
// at most two at once (see StartCluster). Under the race detector, which
// makes every test busy on the CPUs, it leaves go test's default. Call it
// from TestMain, after flag.Parse.
func SideBySide(n int) {
	if raceDetector {
		return
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}

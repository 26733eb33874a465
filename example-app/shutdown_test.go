package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
)

// A request still running when the grace period ends is ended by the
// server: it answers 503 problem+json saying so (not an empty reply), and
// the log says the server ended it.
func TestRunShutdownEndsRequests(t *testing.T) {
	cfg := testConfig(t)
	cfg.shutdownTimeout = 300 * time.Millisecond
	url, logs, stop := bootRun(t, cfg)
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()

	var r response
	var wg sync.WaitGroup
	wg.Go(func() { r = doOperator(t, c, "POST", url+"/jobs/nightly-report/run?seconds=20") })
	eventually(t, "the job to start", func() bool { return strings.Contains(logs.String(), `"msg":"job started"`) })
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	checkProblem(t, r, http.StatusServiceUnavailable)
	if d, _ := r.body["detail"].(string); !strings.Contains(d, "shutting down") || r.header.Get("Retry-After") == "" {
		t.Fatalf("got %s (Retry-After %q), want a detail saying the server is shutting down, and Retry-After", r.raw, r.header.Get("Retry-After"))
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("shutdown took %v with a 300ms grace period, want it not to wait for the 20s job", d)
	}
	out := logs.String()
	for _, want := range []string{`"msg":"shutdown: the grace period ended with requests still running`, `"msg":"request ended by the server: shutting down"`, `"msg":"stopped"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("log lacks %s:\n%s", want, out)
		}
	}
}

// appProcess is the app run as its own process (the test binary, running
// main), with its log.
type appProcess struct {
	cmd  *exec.Cmd
	url  string
	logs *syncBuffer
	done chan struct{} // closed when the process has exited and its log is read
}

// startMain runs the app's main in a process of its own with env (on top
// of this one's), and waits until it listens. The process is killed when t
// ends, if it is still running.
func startMain(t *testing.T, env ...string) *appProcess {
	t.Helper()
	return startMainCmd(t, exec.Command(os.Args[0]), env...)
}

// startMainCmd is startMain running cmd, which must run the test binary.
func startMainCmd(t *testing.T, cmd *exec.Cmd, env ...string) *appProcess {
	t.Helper()
	// Ports of the system's choosing, so that no other process on the
	// machine (another test binary) holds them; env may override.
	cmd.Env = append(os.Environ(), append([]string{mainEnv + "=1", "ADDR=127.0.0.1:0", "ADMIN_ADDR=127.0.0.1:0", "LOG_FORMAT=json"}, env...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &appProcess{cmd: cmd, logs: &syncBuffer{}, done: make(chan struct{})}
	addrs := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = p.logs.Write(append(line, '\n'))
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(line, &rec) == nil && rec.Msg == "listening" {
				addrs <- rec.Addr
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	select {
	case a := <-addrs:
		p.url = "http://" + a
	case <-p.done:
		t.Fatalf("the app exited before it listened: %v; log:\n%s", cmd.ProcessState, p.logs)
	case <-time.After(60 * time.Second):
		t.Fatalf("the app did not listen within 60s; log:\n%s", p.logs)
	}
	return p
}

// signal sends sig to the process.
func (p *appProcess) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// A first Ctrl-C starts a graceful shutdown that waits for the request in
// flight; a second one ends the process at once, long before the grace
// period or the request would have ended: also when the app was started
// with SIGINT ignored, as a shell starts a background job, where the
// signal's default action would do nothing.
func TestMainSecondSignalExitsAtOnce(t *testing.T) {
	redistest.Require(t)
	tests := []struct {
		name string
		cmd  func() *exec.Cmd
	}{
		{"started normally", func() *exec.Cmd { return exec.Command(os.Args[0]) }},
		{"started with SIGINT ignored", func() *exec.Cmd {
			// trap "" keeps the signal ignored across exec, as a
			// non-interactive shell does for a background job.
			return exec.Command("sh", "-c", `trap "" INT; exec "$0"`, os.Args[0])
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t)
			p := startMainCmd(t, tt.cmd(), "REDIS_ADDR="+srv.Addr(), "SHUTDOWN_GRACE=60s", "API_KEYS=shop-1="+testKey, "OPERATORS=shop-1")
			c := &http.Client{Transport: &http.Transport{}}
			defer c.CloseIdleConnections()

			var wg sync.WaitGroup
			defer wg.Wait()
			wg.Go(func() {
				req, _ := http.NewRequest("POST", p.url+"/jobs/nightly-report/run?seconds=30", nil)
				req.Header.Set("Authorization", "Bearer "+testKey)
				if res, err := c.Do(req); err == nil {
					res.Body.Close()
				}
			})
			eventually(t, "the job to start", func() bool { return strings.Contains(p.logs.String(), `"msg":"job started"`) })
			p.signal(t, os.Interrupt)
			eventually(t, "the graceful shutdown to start", func() bool { return strings.Contains(p.logs.String(), `"msg":"shutting down`) })
			select {
			case <-p.done:
				t.Fatalf("the app exited on the first signal with a job in flight and a 60s grace period; log:\n%s", p.logs)
			case <-time.After(500 * time.Millisecond):
			}
			sent := time.Now()
			p.signal(t, os.Interrupt)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				t.Fatalf("the app still runs 10s after a second Ctrl-C; log:\n%s", p.logs)
			}
			if code := p.cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(p.logs.String(), `"msg":"second signal: exiting at once`) {
				t.Fatalf("got exit code %d, want 130 (128+SIGINT) and the log saying why; log:\n%s", code, p.logs)
			}
			t.Logf("exited %v after the second signal", time.Since(sent).Round(time.Millisecond))
		})
	}
}

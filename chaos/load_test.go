//go:build chaos

package chaos_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
)

// loadAPIKey is the API key the load test's caller sends: the example app
// serves only authenticated callers.
const loadAPIKey = "load-test-key-0123456789"

// Load: how long, how many clients at once, how many hot orders at a time,
// and how often the hot orders are replaced by fresh, unpaid ones.
const (
	loadConcurrency = 32
	loadHotOrders   = 4
	loadRotate      = 250 * time.Millisecond
)

// loadDuration is PADLOCK_LOAD_DURATION, default 3s.
func loadDuration(t *testing.T) time.Duration {
	v := os.Getenv("PADLOCK_LOAD_DURATION")
	if v == "" {
		return 3 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > 10*time.Minute {
		t.Fatalf("PADLOCK_LOAD_DURATION=%q: want a duration up to 10m", v)
	}
	return d
}

// TestLoadExampleApp runs the example app as a process on loopback against
// a real redis-server and a SQLite file, and has loadConcurrency clients
// pay loadHotOrders hot orders at once, again and again, with fresh orders
// every loadRotate, for loadDuration. Every order must end with at most one
// charge, and every pay answer that said it charged must match a charge in
// the database.
func TestLoadExampleApp(t *testing.T) {
	srv := redistest.Start(t)
	if !srv.Real() {
		t.Skip("the load test needs a real redis-server")
	}
	bin := build(t, "github.com/padlockgo/padlock/example-app")
	base := startExampleApp(t, bin, srv.Addr())
	duration := loadDuration(t)

	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: loadConcurrency * 2, MaxConnsPerHost: loadConcurrency * 2},
	}
	t.Cleanup(client.CloseIdleConnections)
	ctx := context.Background()

	var (
		hot     atomic.Pointer[[]int64]
		created []int64
		mu      sync.Mutex
		charged = map[int64]int{} // pay answers that charged, per order
	)
	rotate := func() {
		ids := make([]int64, loadHotOrders)
		for i := range ids {
			ids[i] = createOrder(t, ctx, client, base)
		}
		mu.Lock()
		created = append(created, ids...)
		mu.Unlock()
		hot.Store(&ids)
	}
	rotate()

	type result struct {
		latency time.Duration
		status  int
		charged bool
	}
	var (
		wg      sync.WaitGroup
		results = make([][]result, loadConcurrency)
		errs    atomic.Int64
	)
	deadline := time.Now().Add(duration)
	start := time.Now()
	for c := range loadConcurrency {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 7))
			for time.Now().Before(deadline) {
				ids := *hot.Load()
				id := ids[r.IntN(len(ids))]
				t0 := time.Now()
				status, body, err := post(ctx, client, fmt.Sprintf("%s/orders/%d/pay", base, id), "")
				lat := time.Since(t0)
				if err != nil {
					if errs.Add(1) <= 5 {
						t.Errorf("pay order %d: %v", id, err)
					}
					continue
				}
				res := result{latency: lat, status: status}
				if status == http.StatusOK {
					var p struct {
						Charge *struct{ ID int64 } `json:"charge"`
					}
					if err := json.Unmarshal(body, &p); err != nil {
						t.Errorf("pay order %d: body %q: %v", id, body, err)
					}
					res.charged = p.Charge != nil
					if res.charged {
						mu.Lock()
						charged[id]++
						mu.Unlock()
					}
				} else if status != http.StatusConflict && errs.Add(1) <= 5 {
					t.Errorf("pay order %d: status %d: %s", id, status, body)
				}
				results[c] = append(results[c], res)
			}
		})
	}
	for time.Now().Before(deadline) {
		time.Sleep(loadRotate)
		if time.Now().Before(deadline) {
			rotate()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)

	var (
		lats                 []time.Duration
		ok, busy, chargedAns int
	)
	for _, rs := range results {
		for _, r := range rs {
			lats = append(lats, r.latency)
			switch r.status {
			case http.StatusOK:
				ok++
			case http.StatusConflict:
				busy++
			}
			if r.charged {
				chargedAns++
			}
		}
	}
	slices.Sort(lats)
	if len(lats) == 0 {
		t.Fatal("no pay request completed")
	}

	// The database is the judge: an order charged twice is a double charge,
	// whatever the answers said.
	doubles, paidOrders, mismatched := 0, 0, 0
	for _, id := range created {
		n := chargesOf(t, ctx, client, base, id)
		switch {
		case n > 1:
			doubles++
			t.Errorf("order %d charged %d times", id, n)
		case n == 1:
			paidOrders++
		}
		if charged[id] != n {
			mismatched++
			t.Errorf("order %d: %d pay answers said they charged, the database has %d charges", id, charged[id], n)
		}
	}
	pct := func(p float64) time.Duration { return lats[min(len(lats)-1, int(float64(len(lats))*p))] }
	summary := fmt.Sprintf("%d pay requests in %v (%.0f/s) from %d clients on %d hot orders at a time (%d orders): "+
		"%d 200 (%d charged), %d 409 busy, %d errors; latency p50 %v, p90 %v, p99 %v, max %v; "+
		"double charges: %d; orders paid: %d",
		len(lats), elapsed.Round(time.Millisecond), float64(len(lats))/elapsed.Seconds(), loadConcurrency, loadHotOrders, len(created),
		ok, chargedAns, busy, errs.Load(),
		pct(0.50).Round(10*time.Microsecond), pct(0.90).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond),
		lats[len(lats)-1].Round(10*time.Microsecond), doubles, paidOrders)
	t.Log(summary)
	if path := os.Getenv("PADLOCK_LOAD_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(summary+"\n"), 0o644); err != nil {
			t.Errorf("writing %s: %v", path, err)
		}
	}
	if paidOrders == 0 {
		t.Errorf("no order was paid")
	}
}

// startExampleApp runs the example app binary on a free loopback port with
// its database in a temp dir and returns its base URL once /healthz
// answers. It is stopped (SIGTERM, then SIGKILL) when t ends.
func startExampleApp(t *testing.T, bin, redisAddr string) string {
	t.Helper()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "app.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"ADDR=127.0.0.1:0", "REDIS_ADDR="+redisAddr, "REDIS_MODE=single",
		"DB_PATH="+filepath.Join(dir, "orders.db"), "LOG_FORMAT=json", "API_KEYS=load="+loadAPIKey)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start example app: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	// The app logs the address it listens on.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("example app exited: %s", b)
		default:
		}
		if addr := listeningAddr(logPath); addr != "" {
			base := "http://" + addr
			if resp, err := http.Get(base + "/healthz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return base
				}
			}
		}
	}
	b, _ := os.ReadFile(logPath)
	t.Fatalf("example app not healthy within 30s: %s", b)
	return ""
}

// listeningAddr finds the "listening" line in the app's JSON log.
func listeningAddr(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" && line.Addr != "" {
			return line.Addr
		}
	}
	return ""
}

func createOrder(t *testing.T, ctx context.Context, c *http.Client, base string) int64 {
	t.Helper()
	status, body, err := post(ctx, c, base+"/orders", `{"customer":"load","amount_cents":1299,"currency":"EUR"}`)
	if err != nil || status != http.StatusCreated {
		t.Fatalf("create order: %d %s %v", status, body, err)
	}
	var o struct{ ID int64 }
	if err := json.Unmarshal(body, &o); err != nil || o.ID == 0 {
		t.Fatalf("create order: body %s: %v", body, err)
	}
	return o.ID
}

func chargesOf(t *testing.T, ctx context.Context, c *http.Client, base string, id int64) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/orders/"+strconv.FormatInt(id, 10), nil)
	req.Header.Set("Authorization", "Bearer "+loadAPIKey)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("get order %d: %v", id, err)
	}
	defer resp.Body.Close()
	var o struct {
		Charges []json.RawMessage `json:"charges"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("get order %d: status %d: %v", id, resp.StatusCode, err)
	}
	return len(o.Charges)
}

func post(ctx context.Context, c *http.Client, url, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+loadAPIKey)
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes(), err
}

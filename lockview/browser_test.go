package lockview_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/decorator"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/internal/handlertest"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/lockview"
	"github.com/padlockgo/padlock/schedule"
)

// browser returns a chromedp context on a headless Chromium, or skips the
// test when there is none, unless PADLOCK_REQUIRE_BROWSER=1 (set by CI),
// where it fails instead.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("PADLOCK_REQUIRE_BROWSER") == "1" {
			t.Fatal("no chromium on PATH, and PADLOCK_REQUIRE_BROWSER=1 (apt-get install chromium)")
		}
		t.Skip("no chromium on PATH: the page's browser test is skipped (apt-get install chromium, or set PADLOCK_REQUIRE_BROWSER=1 to make this fail)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.Headless, chromedp.WindowSize(1100, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
		cancelAlloc()
	})
	return ctx
}

// TestPageInBrowser loads the page in a real headless browser, as an
// operator who made the "job" namespace readable sees it: held locks,
// readable and redacted, in one order in both tables, each with who holds
// it (a request through httplock: its route and its caller's hash; a job
// through schedule; a function through decorator); refusals and losses
// with their date and zone, each refusal with who held the key then; the
// picture of the last minutes per namespace; the word on fences. No
// caller's secret is anywhere on it. It drops a released lock without
// being reloaded. With PADLOCK_SCREENSHOT set it saves a PNG of the page
// there.
func TestPageInBrowser(t *testing.T) {
	ctx := browser(t)
	const process = "host=web-1 pid=4121"
	l, rec, srv := setup(t, padlock.WithDefaults(padlock.Options{Owner: process}))
	redactor, err := lockkey.NewRedactor(lockkey.WithReadableNamespaces("job"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := lockview.New(l, lockview.Config{Authorize: lockview.AdminListener, Redactor: redactor, Recorder: rec, Refresh: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()

	bg := context.Background()
	// A payment request holds order 1042 through the net/http middleware,
	// naming its route and its caller, whose API key is a secret.
	const secret, other = "sk_live_4242424242424242", "sk_live_7777777777777777"
	pay := httplock.Lock(l, httplock.PathValue("id", lockkey.Int(64)), httplock.WithNamespace("order"),
		httplock.WithCaller(handlertest.Bearer), httplock.WithRedactor(redactor))
	mux, release := holding(t, pay, secret)
	payer := process + " route=POST /orders/<id>/pay caller=#" + redactor.Hash(secret)
	// A job runs through schedule, a checkout through the decorator, each
	// until the test ends.
	stop := make(chan struct{})
	var jobs sync.WaitGroup
	defer jobs.Wait()
	defer close(stop)
	running := make(chan struct{}, 2)
	block := func(context.Context) error {
		running <- struct{}{}
		<-stop
		return nil
	}
	jobs.Go(func() {
		_, _ = schedule.Run(bg, l, "job:nightly-report", schedule.Options{AtMostFor: 10 * time.Second, Redactor: redactor}, block)
	})
	jobs.Go(func() {
		_ = decorator.Do(bg, l, "cart:77", padlock.Options{}, block, decorator.WithName("carts.Checkout"))
	})
	<-running
	<-running
	job, cart := process+" job=job:nightly-report", process+" func=carts.Checkout"
	two, err := l.Acquire(bg, "order:2001", padlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer two.Release(bg)
	// Two refusals: another caller's payment at once (409), and a wait
	// for the job.
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, payRequest(other))
	if w.Code != http.StatusConflict {
		t.Fatalf("another payment of order 1042: got %d, want 409", w.Code)
	}
	if _, err := l.Acquire(bg, "job:nightly-report", padlock.Options{Wait: 150 * time.Millisecond}); !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("Acquire of a held key: got %v, want ErrNotAcquired", err)
	}
	// A loss: the key goes from Redis, the next renewal finds it gone.
	lost, err := l.Acquire(bg, "job:export", padlock.Options{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Client(t).Del(bg, l.RedisKey("job:export")).Err(); err != nil {
		t.Fatal(err)
	}
	<-lost.Done()

	order := "order:… #" + redactor.Hash("order:1042")
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/debug/locks")); err != nil {
		t.Fatal(err)
	}
	poll := func(what, js string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js)); err != nil {
			t.Fatalf("page never showed %s: %v", what, err)
		}
	}
	q := strconv.Quote
	// Held, here and in Redis: the redacted order held by the payment
	// request, the readable job by the job, the cart by the function.
	for _, want := range [][2]string{{order, payer}, {"job:nightly-report", job}, {"cart:… #" + redactor.Hash("cart:77"), cart}} {
		for _, table := range []string{"held", "redis"} {
			poll(want[0]+" held by "+want[1]+" in #"+table, `[...document.querySelectorAll("#`+table+` tbody tr")].some(r => r.cells[0].textContent === `+
				q(want[0])+` && r.cells[1].textContent === `+q(want[1])+`)`)
		}
	}
	// One order in both tables.
	held, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#held tbody tr")].map(r => r.cells[0].textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	inRedis, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#redis tbody tr")].map(r => r.cells[0].textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 4 || !slices.Equal(held, inRedis) || held[0] != "cart:… #"+redactor.Hash("cart:77") {
		t.Errorf("tables: got held %q and Redis %q, want the same 4 locks in one order, cart first", held, inRedis)
	}
	// Times carry their date and zone.
	const date = `/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC[+-]\d{2}:\d{2}$/`
	poll("the update time with date and zone", date+`.test(document.getElementById("generated").textContent)`)
	// Refusals, newest first, and the loss, with their time.
	poll("two refusals", `document.querySelectorAll("#refusals tbody tr").length === 2`)
	refused, err := chromedp.Run(ctx, chromedp.Evaluate[[][]string](`[...document.querySelectorAll("#refusals tbody tr")].map(r => [...r.cells].map(c => c.textContent))`))
	if err != nil {
		t.Fatal(err)
	}
	if len(refused) != 2 || refused[0][1] != "job:nightly-report" || refused[0][3] != job || refused[1][1] != order || refused[1][3] != payer {
		t.Errorf("refusals: got %q, want job:nightly-report held by %q, then %s held by %q", refused, job, order, payer)
	}
	page, err := chromedp.Run(ctx, chromedp.Text("body"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page, "4242") || strings.Contains(page, "7777") {
		t.Errorf("the page shows a caller's secret: %q", page)
	}
	poll("the loss of job:export with its time", `[...document.querySelectorAll("#losses tbody tr")].some(r => r.cells[1].textContent === "job:export" && `+date+`.test(r.cells[0].textContent))`)
	poll("refusal times with date and zone", `[...document.querySelectorAll("#refusals tbody tr")].every(r => `+date+`.test(r.cells[0].textContent))`)
	// The picture: per namespace, bars of what happened.
	poll("bars of taken and refused order locks", `["acquired", "refused"].every(k => document.querySelector('svg.spark[data-namespace="order"] rect.' + k))`)
	poll("bars of the job's waits and loss", `["acquired", "waited", "refused", "lost"].every(k => document.querySelector('svg.spark[data-namespace="job"] rect.' + k))`)
	totals, err := chromedp.Run(ctx, chromedp.Text(`#activity tbody`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(totals, "2 taken · 1 waited · 1 refused · 1 lost") || !strings.Contains(totals, "2 taken · 0 waited · 1 refused · 0 lost") {
		t.Errorf("activity totals: got %q, want job 2 taken, 1 waited, 1 refused, 1 lost; order 2 taken, 1 refused", totals)
	}
	note, err := chromedp.Run(ctx, chromedp.Text("#fence-note"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(note, "larger than that of every earlier holder") {
		t.Errorf("fence note: got %q, want a word on what a fence is", note)
	}
	if path := os.Getenv("PADLOCK_SCREENSHOT"); path != "" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	release() // the payment request returns
	// The page refreshes by itself: the released lock goes away.
	poll("order:1042 gone after its release", `![...document.querySelectorAll("#held tbody tr, #redis tbody tr")].some(r => r.cells[0].textContent === `+q(order)+`) && document.querySelector("#held tbody").textContent.includes("job:nightly-report")`)
}

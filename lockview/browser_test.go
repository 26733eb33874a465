package lockview_test

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/lockview"
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

// TestPageInBrowser loads the page in a real headless browser: it shows a
// lock taken here with its key and owner, and drops it after its release
// without being reloaded. With PADLOCK_SCREENSHOT set it saves a PNG of
// the page there.
func TestPageInBrowser(t *testing.T) {
	ctx := browser(t)
	l, rec, _ := setup(t)
	h, err := lockview.New(l, lockview.Config{Authorize: lockview.AdminListener, ShowKeys: true, Recorder: rec, Refresh: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()

	bg := context.Background()
	lk, err := l.Acquire(bg, "order:1042", padlock.Options{Owner: "host=web-1 pid=4121 req=7f3a"})
	if err != nil {
		t.Fatal(err)
	}
	job, err := l.Acquire(bg, "job:nightly-report", padlock.Options{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer job.Release(bg)
	const owner = "host=web-1 pid=4121 req=7f3a"

	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/debug/locks")); err != nil {
		t.Fatal(err)
	}
	// The held table lists the lock with its owner.
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](`[...document.querySelectorAll("#held tbody tr")].some(r => r.cells[0].textContent === "order:1042" && r.cells[1].textContent.startsWith(`+"'"+owner+"'"+`))`)); err != nil {
		t.Fatalf("page never showed order:1042 held by %s: %v", owner, err)
	}
	redis, err := chromedp.Run(ctx, chromedp.Text("#redis tbody"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(redis, "order:1042") || !strings.Contains(redis, owner) {
		t.Errorf("Redis table: got %q, want order:1042 and owner %s", redis, owner)
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
	if err := lk.Release(bg); err != nil {
		t.Fatal(err)
	}
	// The page refreshes by itself: the released lock goes away.
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](`![...document.querySelectorAll("#held tbody tr, #redis tbody tr")].some(r => r.cells[0].textContent === "order:1042") && document.querySelector("#held tbody").textContent.includes("job:nightly-report")`)); err != nil {
		t.Fatalf("page still showed order:1042 after its release: %v", err)
	}
}

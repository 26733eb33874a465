package lockview_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/lockview"
)

// snapshot returns the view's JSON.
func snapshot(t *testing.T, l *padlock.Locker, c lockview.Config) lockview.Snapshot {
	t.Helper()
	h, err := lockview.New(l, c)
	if err != nil {
		t.Fatal(err)
	}
	_, body := get(t, h, "/?format=json", nil)
	var s lockview.Snapshot
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return s
}

func sum(v []int) (n int) {
	for _, x := range v {
		n += x
	}
	return n
}

// The Recorder keeps refusals (newest first, keys redacted but in the
// namespaces the operator made readable) and counts, per namespace, the
// locks taken, refused, waited for and lost.
func TestRefusalsAndActivity(t *testing.T) {
	l, rec, srv := setup(t)
	ctx := context.Background()
	held, err := l.Acquire(ctx, "order:1", padlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	if _, err := l.Acquire(ctx, "order:1", padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("second Acquire: got %v, want ErrNotAcquired", err)
	}
	if _, err := l.Acquire(ctx, "order:1", padlock.Options{Wait: time.Second}); !errors.Is(err, padlock.ErrNotAcquired) { // a wait its first attempt outlasts on no loaded machine
		t.Fatalf("waiting Acquire: got %v, want ErrNotAcquired", err)
	}
	job, err := l.Acquire(ctx, "job:export", padlock.Options{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Client(t).Del(ctx, l.RedisKey("job:export")).Err(); err != nil {
		t.Fatal(err)
	}
	<-job.Done() // its next renewal finds it gone

	r, err := lockkey.NewRedactor(lockkey.WithReadableNamespaces("job", "order-readable"))
	if err != nil {
		t.Fatal(err)
	}
	s := snapshot(t, l, lockview.Config{Authorize: lockview.AdminListener, Recorder: rec, Redactor: r, NoInspect: true})

	if len(s.Refusals) != 2 {
		t.Fatalf("refusals: got %+v, want 2", s.Refusals)
	}
	for _, f := range s.Refusals {
		if f.Namespace != "order" || f.Key.Key != "" || f.Hash != r.Hash("order:1") || f.At.IsZero() {
			t.Errorf("refusal: got %+v, want order:1 redacted, with its time", f)
		}
	}
	if s.Refusals[0].At.Before(s.Refusals[1].At) || s.Refusals[0].WaitedMS < 1000 {
		t.Errorf("refusals: got %+v, want the waiting one (>= 1s) first", s.Refusals)
	}
	if len(s.Losses) != 1 || s.Losses[0].Key.Key != "job:export" {
		t.Errorf("losses: got %+v, want job:export, readable", s.Losses)
	}
	want := map[string][4]int{"order": {1, 2, 1, 0}, "job": {1, 0, 0, 1}} // taken, refused, waited, lost
	if len(s.Activity) != len(want) {
		t.Fatalf("activity: got %+v, want namespaces job and order", s.Activity)
	}
	if s.Activity[0].Namespace != "job" || s.ActivityBucket != lockview.ActivityBucket.Milliseconds() {
		t.Errorf("activity: got %s first, bucket %dms; want job first, %v", s.Activity[0].Namespace, s.ActivityBucket, lockview.ActivityBucket)
	}
	for _, a := range s.Activity {
		if len(a.Acquired) != lockview.ActivityBuckets {
			t.Errorf("%s: got %d buckets, want %d", a.Namespace, len(a.Acquired), lockview.ActivityBuckets)
		}
		got := [4]int{sum(a.Acquired), sum(a.Refused), sum(a.Waited), sum(a.Lost)}
		if got != want[a.Namespace] {
			t.Errorf("%s: got taken, refused, waited, lost %v, want %v", a.Namespace, got, want[a.Namespace])
		}
	}
}

// Both tables of locks list them in one order: namespace, then key.
func TestTablesShareOneOrder(t *testing.T) {
	l, rec, _ := setup(t)
	ctx := context.Background()
	for _, k := range []string{"order:2", "job:b", "order:10", "job:a", "cart:9"} {
		lk, err := l.Acquire(ctx, k, padlock.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
	}
	s := snapshot(t, l, lockview.Config{Authorize: lockview.AdminListener, Recorder: rec, ShowKeys: true})
	want := []string{"cart:9", "job:a", "job:b", "order:10", "order:2"}
	var held, inRedis []string
	for _, h := range s.Held {
		held = append(held, h.Key.Key)
	}
	for _, x := range s.Redis.Locks {
		inRedis = append(inRedis, x.Key.Key)
	}
	if !slices.Equal(held, want) || !slices.Equal(inRedis, want) {
		t.Errorf("got held %v, Redis %v; want both %v", held, inRedis, want)
	}
}

package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/schedule"
)

// The explorer's schedule family: goroutines on several Lockers run one
// job, each through schedule.Every or through schedule.Run called by a
// loop of its own at each tick, under the run's faults. Every call of the
// job's fn is a grant the checker follows as any holder (exclusion,
// err-late, dead-grant), and the tick it ran for: no tick runs twice
// (tick-once, explore_verdict_test.go).

// jobs is the schedule run's job: its interval and lock options.
type jobs struct {
	interval, least, most time.Duration
}

func newJobs(r *rand.Rand) *jobs {
	iv := pick(r, 300*time.Millisecond, 500*time.Millisecond, time.Second)
	least := pick(r, iv/4, iv/2, iv/2, 3*iv/4)
	most := max(least, pick(r, 300*time.Millisecond, 600*time.Millisecond, time.Second, 2*time.Second))
	return &jobs{interval: iv, least: least, most: most}
}

// jobName is the job's name, its padlock key.
const jobName = "job"

// scheduler runs the job on Locker li until the run ends: through Every
// two times in three, otherwise through Run at each tick, waking up to
// half of AtLeastFor late (a clock a little behind).
func (w *world) scheduler(actor, li int) {
	r := w.rng(actor)
	g := fmt.Sprintf("s%d@L%d", actor, li)
	l, j := w.lockers[li], w.jobs
	o := schedule.Options{AtMostFor: j.most, AtLeastFor: j.least, OnError: func(err error) { w.tr.Add("%s tick: %v", g, err) }}
	if r.IntN(3) != 0 {
		ctx, cancel := context.WithDeadline(context.Background(), w.end)
		defer cancel()
		err := schedule.Every(ctx, l, jobName, j.interval, o, w.job(r, g, time.Time{}, true))
		w.tr.Add("%s Every returned: %v", g, err)
		return
	}
	for time.Now().Before(w.end) && !w.isClosed(li) {
		tick := time.Now().Truncate(j.interval).Add(j.interval)
		time.Sleep(time.Until(tick.Add(time.Duration(r.Int64N(int64(j.least/2) + 1)))))
		ran, err := schedule.Run(context.Background(), l, jobName, o, w.job(r, g, tick, false))
		w.tr.Add("%s Run for the tick at %.3fs: ran %v, %v", g, tick.Sub(w.tr.Start()).Seconds(), ran, err)
	}
}

// errJob is the error the job's fn returns now and then.
var errJob = errors.New("the job failed")

// job returns the job's fn for Every (the tick comes from its context)
// or for Run at tick: it holds the lock it is given for a while (mostly
// less than AtLeastFor, sometimes past the interval), checking it before
// each small step of its work, and stops when its context ends.
func (w *world) job(r *rand.Rand, g string, tick time.Time, every bool) func(context.Context) error {
	return func(ctx context.Context) error {
		lk := padlock.FromContext(ctx)
		if every {
			tick, _ = schedule.Tick(ctx)
		}
		if lk == nil || tick.IsZero() {
			w.chk.fail(invTickOnce, w.chk.now(), "%s: the job's context carries lock %v and tick %v", g, lk, tick)
			return nil
		}
		h := w.chk.grant(g, "mutex", jobName, lk.Fence(), lk, nil, 1, w.chk.now(), nil)
		w.chk.ranTick(h, tick, every, w.jobs.least)
		d := time.Duration(1+r.Int64N(int64(w.jobs.least))) / 2
		if r.IntN(4) == 0 {
			d = time.Duration(1 + r.Int64N(int64(3*w.jobs.interval/2)))
		}
		for left := d; left > 0; {
			step := min(left, 10*time.Millisecond)
			time.Sleep(step)
			left -= step
			if ctx.Err() != nil || !w.chk.claim(h) {
				return ctx.Err()
			}
		}
		if r.IntN(8) == 0 {
			return errJob
		}
		return nil
	}
}

package schedule_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/padlocktest"
	"github.com/padlockgo/padlock/schedule"
	"github.com/redis/go-redis/v9"
)

// Every instance of a service runs the same loop; the job runs once per
// tick across all of them. AtLeastFor keeps the job's lock after a short
// run, so an instance whose clock is a little behind skips the tick too.
func ExampleRun() {
	m := miniredis.NewMiniRedis() // stands in for your Redis
	if err := m.Start(); err != nil {
		panic(err)
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	o := schedule.Options{AtMostFor: 10 * time.Minute, AtLeastFor: 50 * time.Second}
	for _, instance := range []string{"a", "b"} { // two instances at the same tick
		ran, err := schedule.Run(ctx, locker, "report:hourly", o, func(ctx context.Context) error {
			fmt.Println("instance", instance, "sends the report")
			return nil
		})
		fmt.Println("instance", instance, "ran:", ran, err)
	}
	// Output:
	// instance a sends the report
	// instance a ran: true <nil>
	// instance b ran: false <nil>
}

// Every instance of a service runs the same loop; each tick, one of them
// runs the job. Here two instances share one Redis, and the loop stops
// after the third run.
func ExampleEvery() {
	env, err := padlocktest.Start() // stands in for your Redis
	if err != nil {
		panic(err)
	}
	defer env.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	var (
		mu   sync.Mutex
		runs int
	)
	report := func(ctx context.Context) error {
		tick, _ := schedule.Tick(ctx) // the same on every instance
		mu.Lock()
		defer mu.Unlock()
		runs++
		fmt.Println("report", runs, "on a tick:", tick.Equal(tick.Truncate(100*time.Millisecond)))
		if runs == 3 {
			stop() // a service stops the loop when it shuts down
		}
		return nil
	}
	other, err := padlock.New(env.Client()) // a second instance
	if err != nil {
		log.Fatal(err)
	}
	defer other.Close()
	var wg sync.WaitGroup
	for _, locker := range []*padlock.Locker{env.Locker(), other} {
		wg.Go(func() {
			err := schedule.Every(ctx, locker, "report:digest", 100*time.Millisecond,
				schedule.Options{AtMostFor: time.Minute}, report)
			fmt.Println("stopped:", err)
		})
	}
	wg.Wait()
	// Output:
	// report 1 on a tick: true
	// report 2 on a tick: true
	// report 3 on a tick: true
	// stopped: context canceled
	// stopped: context canceled
}

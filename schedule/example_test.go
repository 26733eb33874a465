package schedule_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/padlockgo/padlock"
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
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	locker := padlock.New(rdb)
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

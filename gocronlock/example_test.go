package gocronlock_test

import (
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-co-op/gocron/v2"
	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/gocronlock"
	"github.com/padlockgo/padlock/schedule"
	"github.com/redis/go-redis/v9"
)

// Each instance builds its scheduler with the padlock locker; every job
// then runs on one instance per run.
func Example() {
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

	jobLocker, err := gocronlock.New(locker, schedule.Options{AtMostFor: 10 * time.Minute, AtLeastFor: 30 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(jobLocker))
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan struct{})
	_, err = s.NewJob(
		gocron.DurationJob(time.Minute),
		gocron.NewTask(func() { fmt.Println("report sent"); close(done) }),
		gocron.WithName("report"), // the lock's key
		gocron.WithStartAt(gocron.WithStartImmediately()),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	s.Start()
	<-done
	_ = s.Shutdown()
	// Output: report sent
}

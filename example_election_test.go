package padlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/padlockgo/padlock"
)

// Every instance campaigns; the one elected works until it resigns or
// loses the leadership, and the others can ask who leads.
func ExampleElection_Campaign() {
	rdb, stop := exampleRedis()
	defer stop()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	election := locker.Election("billing-scheduler", padlock.Options{TTL: 10 * time.Second})
	term, err := election.Campaign(ctx, "10.0.0.7:8080") // blocks until elected
	if err != nil {
		fmt.Println("campaign:", err)
		return
	}
	// The leader's work runs under the term's context: it is cancelled as
	// soon as the leadership is lost, before another can be elected.
	work := term.Context(ctx)
	_ = work

	leader, _ := election.Leader(ctx)
	fmt.Println("leader:", leader.Value, "same term:", leader.Fence == term.Fence())

	term.Resign(ctx)
	_, err = election.Leader(ctx)
	fmt.Println(err)
	// Output:
	// leader: 10.0.0.7:8080 same term: true
	// padlock: no leader
}

// Observe reports each new leader as it takes office.
func ExampleElection_Observe() {
	rdb, stop := exampleRedis()
	defer stop()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	election := locker.Election("primary", padlock.Options{})
	leaders := election.Observe(ctx)
	for _, addr := range []string{"a:1", "b:2"} {
		term, err := election.Campaign(ctx, addr)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("in office:", (<-leaders).Value)
		term.Resign(ctx)
	}
	// Output:
	// in office: a:1
	// in office: b:2
}

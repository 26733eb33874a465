// Package schedule runs jobs at most once per interval across a fleet, in
// the manner of ShedLock: every instance tries to run the job when it is
// due, and the one that takes the job's lock runs it while the others skip.
//
// Two durations shape a job's lock:
//
//   - AtMostFor is the lock's lease: how long the job stays locked after
//     the instance running it died. While that instance lives, the lease is
//     renewed, and the job's context is cancelled if the lock is lost.
//   - AtLeastFor keeps the lock for a minimum time after the job starts,
//     even when the job returns sooner. Instances whose clocks disagree fire
//     the same schedule at slightly different moments; without the minimum,
//     a short job finished by the first could run again on a late one.
//     Set it a little below the interval (or to the largest clock skew you
//     expect). When the job returns, the lock's lease is shortened to what
//     is left of the minimum, in one owner-checked script
//     (padlock.Lock.ReleaseAfter), on the Redis server's clock.
//
// Every is the loop: once per interval across the fleet, on the multiples
// of the interval, until its context ends.
//
//	go schedule.Every(ctx, locker, "report:hourly", time.Hour,
//		schedule.Options{AtMostFor: 10 * time.Minute}, sendReport)
//
// Run is one tick, for a hand-written loop or any scheduler. For
// go-co-op/gocron v2, the gocronlock module adapts Lock to its
// WithDistributedLocker, so the engine's users never compile gocron.
package schedule

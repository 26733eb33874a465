package padlock

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// combiner sends the scripts of one kind that a Locker's callers send at
// once as one pipeline: while maxFlights are on their way, those that
// come meanwhile queue, and go together, in one round trip, as soon as
// one is answered. A caller that finds fewer on their way sends its
// script at once, as script.run does, so a lone caller pays nothing for
// it; with many hot keys, where the hand-offs of different keys fall due
// together, the round trips, the system calls on both sides and
// go-redis's work per command are shared by every script of a batch.
//
// A queued caller waits for its batch's reply whatever its own context
// says: the batch is one request, which its context does not own. A
// script of a batch that met a closed connection, or a server without
// the script (NOSCRIPT), is sent again on its own by its caller
// (script.run): nothing sent on a closed connection can run later, and a
// NOSCRIPT reply means it did not run.
//
// Each command of a batch is still one script with its own grant and
// lease change (lua/grant.lua), sent once (onceCmd): a batch changes when
// scripts go, never what they may do.
type combiner struct {
	sc      *script
	mu      sync.Mutex
	sending int         // scripts or batches on their way, at most maxFlights
	queue   []*combined // scripts that came meanwhile, for the next batch
}

// combined is a script waiting in a combiner's queue.
type combined struct {
	cmd  *onceCmd
	done chan struct{} // closed when cmd has its reply, or when lead is set
	// lead, when set, makes the caller the sender of the next batch:
	// these scripts, its own first.
	lead  bool
	batch []*combined
}

// maxFlights is how many scripts or batches of one combiner may be on
// their way at once. With one, a hand-off that falls due while a batch is
// out waits for its answer and then its own round trip; a second flight
// halves that wait while batches stay large. Measured on 64 hot keys × 4
// workers (bench/, quiet 2-CPU machine): 1.35x and 1.74x rueidislock with
// one flight, 1.69x and 1.62x with two, 1.67x with four.
const maxFlights = 2

func newCombiner(sc *script) *combiner { return &combiner{sc: sc} }

// run runs the combiner's script through c with keys and args, as
// script.run does, alone or in a batch.
func (cb *combiner) run(ctx context.Context, c redis.UniversalClient, retries int, keys []string, args ...any) *redis.Cmd {
	cmd, _ := cb.runCounted(ctx, c, retries, keys, args...)
	return cmd
}

// runCounted is run, and reports whether a copy was sent again after a
// closed connection (script.runCounted).
func (cb *combiner) runCounted(ctx context.Context, c redis.UniversalClient, retries int, keys []string, args ...any) (*redis.Cmd, bool) {
	cb.mu.Lock()
	if cb.sending < maxFlights {
		cb.sending++
		cb.mu.Unlock()
		cmd, again := cb.sc.runCounted(ctx, c, retries, keys, args...)
		cb.handOn()
		return cmd, again
	}
	m := &combined{cmd: cb.sc.cmd(ctx, "evalsha", cb.sc.sha, keys, args), done: make(chan struct{})}
	cb.queue = append(cb.queue, m)
	cb.mu.Unlock()
	<-m.done
	if m.lead {
		cb.send(ctx, c, m.batch)
		cb.handOn()
	}
	if err := m.cmd.Err(); err != nil && (redis.HasErrorPrefix(err, "NOSCRIPT") || closedConn(err)) {
		cmd, again := cb.sc.runCounted(ctx, c, retries, keys, args...)
		return cmd, again || closedConn(err)
	}
	return &m.cmd.Cmd, false
}

// handOn, called by the sender of a script or batch once it is answered,
// makes the first queued caller the sender of all that queued meanwhile,
// or counts one flight fewer on its way.
func (cb *combiner) handOn() {
	cb.mu.Lock()
	batch := cb.queue
	cb.queue = nil
	if len(batch) == 0 {
		cb.sending--
	}
	cb.mu.Unlock()
	if len(batch) > 0 {
		batch[0].lead, batch[0].batch = true, batch
		close(batch[0].done)
	}
}

// send pipelines the scripts of batch and wakes every caller but the
// first, the sender. It sends under ctx without its cancellation: the
// batch carries other callers' scripts too.
func (cb *combiner) send(ctx context.Context, c redis.UniversalClient, batch []*combined) {
	if len(batch) == 1 {
		_ = c.Process(context.WithoutCancel(ctx), batch[0].cmd)
		return
	}
	_, _ = c.Pipelined(context.WithoutCancel(ctx), func(p redis.Pipeliner) error {
		for _, m := range batch {
			_ = p.Process(ctx, m.cmd)
		}
		return nil
	})
	for _, m := range batch[1:] {
		close(m.done)
	}
}

package padlock

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// The scripts run with script.run: EVALSHA, falling back to EVAL once per
// server when the script is not loaded yet, each sent at most once (see
// onceCmd). Each script's header says its KEYS, ARGV and reply.
var (
	grantLua        = luaFile("grant.lua")
	claimLua        = luaFile("claim.lua")
	bidsLua         = claimLua + luaFile("bids.lua")
	acquireLua      = grantLua + bidsLua + luaFile("acquire.lua")
	queueHeadLua    = claimLua + luaFile("queue_head.lua")
	releaseLua      = grantLua + bidsLua + luaFile("release.lua")
	releaseFairLua  = grantLua + luaFile("release_fair.lua")
	leaveFairLua    = luaFile("leave_fair.lua")
	handoverFairLua = grantLua + luaFile("handover_fair.lua")

	acquireFairScript = newScript(queueHeadLua + grantLua + luaFile("acquire_fair.lua"))
	extendScript      = newScript(grantLua + luaFile("extend.lua"))
	resumeScript      = newScript(grantLua + luaFile("resume.lua"))
	handoverScript    = newScript(grantLua + luaFile("handover.lua"))
	pttlScript        = newScript(grantLua + luaFile("pttl.lua"))
)

//go:embed lua/*.lua
var luaFiles embed.FS

// luaFile returns the source of lua/name. A name that is not there
// panics when the package is initialised, so no test run misses it.
func luaFile(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name)
	if err != nil {
		panic("padlock: " + err.Error())
	}
	return string(b)
}

// publishingScripts are the scripts that send notices (a release, or a
// waiter that wants the lock). They come in two flavours: PUBLISH for a
// node or Sentinel deployment, and SPUBLISH for Cluster, where a sharded
// notice goes only to the shard that owns the lock's slot instead of to
// every node. Every notice is sent with redis.pcall, so that a refused one
// (no channel permission) never fails the lock operation around it.
type publishingScripts struct {
	acquire, release, releaseFair, leaveFair, handoverFair *script
}

func newPublishingScripts(sharded bool) *publishingScripts {
	flavour := func(src string) *script {
		if sharded {
			src = strings.ReplaceAll(src, "redis.pcall('publish'", "redis.pcall('spublish'")
		}
		return newScript(src)
	}
	return &publishingScripts{
		acquire:     flavour(acquireLua),
		release:     flavour(releaseLua),
		releaseFair: flavour(queueHeadLua + releaseFairLua),
		leaveFair:   flavour(queueHeadLua + leaveFairLua),
		// The fair hand-off releases, with a notice, when the head of
		// the queue waits elsewhere.
		handoverFair: flavour(queueHeadLua + handoverFairLua),
	}
}

var (
	plainScripts   = newPublishingScripts(false)
	shardedScripts = newPublishingScripts(true)
)

// script is a Lua script and its SHA1, as Redis names loaded scripts.
type script struct {
	src, sha string
}

func newScript(src string) *script {
	h := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(h[:])}
}

// Hash returns the script's SHA1, for EVALSHA.
func (s *script) Hash() string { return s.sha }

// Load loads the script on c's server (on every master, for a Cluster
// client).
func (s *script) Load(ctx context.Context, c redis.Scripter) *redis.StringCmd {
	return c.ScriptLoad(ctx, s.src)
}

// run runs the script through c: EVALSHA, and EVAL if the server lacks it,
// each sent once by go-redis (onceCmd). A command that could not be sent
// (no connection could be made), or whose connection closed before its
// reply, is tried again after closedRetryBackoff, doubled each time,
// retries times at most, so a restarting server is ridden out as with
// go-redis's own retries. A copy that met a closed connection to Redis
// itself cannot run later; behind a proxy or load balancer it may have
// run, or run later still, so every command that is sent again is one
// whose copies are the same grant's, and the same lease change
// (lua/grant.lua): a late copy changes nothing that came after it.
func (s *script) run(ctx context.Context, c processor, retries int, keys []string, args ...any) *redis.Cmd {
	cmd, _ := s.runCounted(ctx, c, retries, keys, args...)
	return cmd
}

// runCounted is run, and reports whether a copy was sent again after a
// closed connection.
func (s *script) runCounted(ctx context.Context, c processor, retries int, keys []string, args ...any) (*redis.Cmd, bool) {
	cmd, again := s.process(ctx, c, retries, "evalsha", s.sha, keys, args)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		if ctx.Err() != nil && ctx.Value(cleanupKey{}) != nil {
			// A clean-up whose bound ran out as the NOSCRIPT reply came:
			// it did not run, so it goes again, with a bound of its own.
			var cancel context.CancelFunc
			ctx, cancel = cleanupContext(ctx)
			defer cancel()
		}
		var again2 bool
		cmd, again2 = s.process(ctx, c, retries, "eval", s.src, keys, args)
		again = again || again2
	}
	return cmd, again
}

func (s *script) process(ctx context.Context, c processor, retries int, verb, body string, keys []string, args []any) (*redis.Cmd, bool) {
	backoff := closedRetryBackoff
	for try := 0; ; try++ {
		cmd := s.cmd(ctx, verb, body, keys, args)
		_ = c.Process(ctx, cmd)
		if err := cmd.Err(); try >= retries || err == nil || !closedConn(err) {
			return &cmd.Cmd, try > 0
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return &cmd.Cmd, try > 0
		}
		backoff *= 2
	}
}

// How often, and after how long, a command that met a closed connection
// is sent again on one deployment (run): 8, 16, 32 and 64ms, about what
// go-redis's default MaxRetries and backoff give. Redlock nodes fail fast.
const (
	closedRetries      = 4
	closedRetryBackoff = 8 * time.Millisecond
)

// queue adds the script's EVALSHA to pipeline p, sent once (onceCmd): go-redis
// does not resend a pipeline that holds such a command.
func (s *script) queue(ctx context.Context, p redis.Pipeliner, keys []string, args ...any) *redis.Cmd {
	cmd := s.cmd(ctx, "evalsha", s.sha, keys, args)
	_ = p.Process(ctx, cmd)
	return &cmd.Cmd
}

// queueEval adds the script's EVAL to pipeline p, sent once.
func (s *script) queueEval(ctx context.Context, p redis.Pipeliner, keys []string, args ...any) *redis.Cmd {
	cmd := s.cmd(ctx, "eval", s.src, keys, args)
	_ = p.Process(ctx, cmd)
	return &cmd.Cmd
}

func (s *script) cmd(ctx context.Context, verb, body string, keys []string, args []any) *onceCmd {
	all := make([]any, 0, 3+len(keys)+len(args))
	all = append(all, verb, body, len(keys))
	for _, k := range keys {
		all = append(all, k)
	}
	all = append(all, args...)
	c := &onceCmd{}
	c.Cmd = *redis.NewCmd(ctx, all...)
	return c
}

// processor sends a command: a go-redis client or pipeline.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// onceCmd is a command go-redis sends at most once. By default go-redis
// sends a command again when its reply is lost (a read timeout, a broken
// connection), up to MaxRetries times; the first copy may still run later,
// after commands sent since (a stalled server runs what waited in its
// socket when it resumes). A lease change that runs twice, once late, could
// set a lease other than the one the client trusts (lease.go), or take a
// lock nobody knows of. padlock decides itself when to try again.
type onceCmd struct{ redis.Cmd }

// NoRetry tells go-redis not to send the command again.
func (*onceCmd) NoRetry() bool { return true }

// closedConn reports whether err says that no connection could be made,
// or that the connection was closed (a restarted server, an idle
// connection the server dropped): nothing sent on it can run later.
func closedConn(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// renewLoading sends the renewals of batch at idx with send, which
// returns those the server had no script for (NOSCRIPT). A server that
// restarted (or never ran a lease change) lacks the lease scripts: they
// are loaded there, on node, once, and those renewals sent again, rather
// than one EVAL each. Only there: on a Cluster, loading them everywhere
// would wait on every node, the slowest included. A renewal whose script
// is still missing fails with errNoScript.
func renewLoading(ctx context.Context, node redis.Scripter, batch []renewal, idx []int, send func(idx []int) (missing []int)) {
	for try := 0; len(idx) > 0; try++ {
		missing := send(idx)
		if len(missing) == 0 {
			return
		}
		var err error
		if try == 0 {
			err = loadExtenders(ctx, node, batch, missing)
		}
		if try == 1 || err != nil {
			if err != nil {
				err = errors.Join(errNoScript, err)
			} else {
				err = errNoScript
			}
			for _, i := range missing {
				batch[i].ok, batch[i].err = false, err
			}
			return
		}
		idx = missing
	}
}

var errNoScript = errors.New("padlock: extend script not loaded")

// loadExtenders loads on node the lease scripts of the renewals of batch
// at idx, each once.
func loadExtenders(ctx context.Context, node redis.Scripter, batch []renewal, idx []int) error {
	loaded := map[*script]bool{}
	for _, i := range idx {
		sc := batch[i].id.extender()
		if loaded[sc] {
			continue
		}
		if err := sc.Load(ctx, node).Err(); err != nil {
			return err
		}
		loaded[sc] = true
	}
	return nil
}

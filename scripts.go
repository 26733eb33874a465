package padlock

import (
	_ "embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The scripts run with Script.Run: EVALSHA, falling back to EVAL once per
// server when the script is not loaded yet. Each script's header says its
// KEYS, ARGV and reply.
var (
	//go:embed acquire.lua
	acquireLua string

	//go:embed queue_head.lua
	queueHeadLua string

	//go:embed acquire_fair.lua
	acquireFairLua    string
	acquireFairScript = redis.NewScript(queueHeadLua + acquireFairLua)

	//go:embed extend.lua
	extendLua    string
	extendScript = redis.NewScript(extendLua)

	//go:embed pttl.lua
	pttlLua    string
	pttlScript = redis.NewScript(pttlLua)

	//go:embed release.lua
	releaseLua string
	//go:embed release_fair.lua
	releaseFairLua string
	//go:embed leave_fair.lua
	leaveFairLua string
)

// publishingScripts are the scripts that send notices (a release, or a
// waiter that wants the lock). They come in two flavours: PUBLISH for a
// node or Sentinel deployment, and SPUBLISH for Cluster, where a sharded
// notice goes only to the shard that owns the lock's slot instead of to
// every node. Every notice is sent with redis.pcall, so that a refused one
// (no channel permission) never fails the lock operation around it.
type publishingScripts struct {
	acquire, release, releaseFair, leaveFair *redis.Script
}

func newPublishingScripts(sharded bool) *publishingScripts {
	flavour := func(src string) *redis.Script {
		if sharded {
			src = strings.ReplaceAll(src, "redis.pcall('publish'", "redis.pcall('spublish'")
		}
		return redis.NewScript(src)
	}
	return &publishingScripts{
		acquire:     flavour(acquireLua),
		release:     flavour(releaseLua),
		releaseFair: flavour(queueHeadLua + releaseFairLua),
		leaveFair:   flavour(queueHeadLua + leaveFairLua),
	}
}

var (
	plainScripts   = newPublishingScripts(false)
	shardedScripts = newPublishingScripts(true)
)

package padlock

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The scripts run with Script.Run: EVALSHA, falling back to EVAL once per
// server when the script is not loaded yet. Each script's header says its
// KEYS, ARGV and reply.
var (
	//go:embed acquire.lua
	acquireLua    string
	acquireScript = redis.NewScript(acquireLua)

	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)

	//go:embed extend.lua
	extendLua    string
	extendScript = redis.NewScript(extendLua)

	//go:embed pttl.lua
	pttlLua    string
	pttlScript = redis.NewScript(pttlLua)
)

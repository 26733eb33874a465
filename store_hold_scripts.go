package padlock

import (
	_ "embed"
	"strings"
)

// The scripts of semaphores and read-write locks (semaphore.go,
// rwlock.go). Those that publish notices come in the two flavours of
// publishingScripts; the fair-queue helpers (queue_head.lua) and the
// fence and lease helpers (lua/fence.lua) are prepended to the scripts
// that use them.
var (
	//go:embed lua/fence.lua
	fenceLua string
	//go:embed lua/sem_acquire.lua
	semAcquireLua string
	//go:embed lua/sem_release.lua
	semReleaseLua string
	//go:embed lua/rw_read.lua
	rwReadLua string
	//go:embed lua/rw_write.lua
	rwWriteLua string
	//go:embed lua/rw_release.lua
	rwReleaseLua string

	//go:embed lua/hold_extend.lua
	holdExtendLua    string
	holdExtendScript = newScript(holdExtendLua)

	//go:embed lua/hold_pttl.lua
	holdPTTLLua    string
	holdPTTLScript = newScript(holdPTTLLua)
)

// holdScripts are one flavour (PUBLISH or SPUBLISH) of the scripts that
// take and give back permits and read-write holds.
type holdScripts struct {
	semAcquire, semRelease, rwRead, rwWrite, rwRelease *script
}

func newHoldScripts(sharded bool) *holdScripts {
	flavour := func(src string) *script {
		src = queueHeadLua + fenceLua + grantLua + src
		if sharded {
			src = strings.ReplaceAll(src, "redis.pcall('publish'", "redis.pcall('spublish'")
		}
		return newScript(src)
	}
	return &holdScripts{
		semAcquire: flavour(semAcquireLua),
		semRelease: flavour(semReleaseLua),
		rwRead:     flavour(rwReadLua),
		rwWrite:    flavour(rwWriteLua),
		rwRelease:  flavour(rwReleaseLua),
	}
}

var (
	plainHoldScripts   = newHoldScripts(false)
	shardedHoldScripts = newHoldScripts(true)
)

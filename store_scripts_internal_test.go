package padlock

import (
	"strings"
	"testing"
)

// TestNoticesAreBestEffort checks every script that publishes does so
// through redis.pcall, so a refused notice cannot fail the lock operation
// around it, and that the Cluster flavour of each one publishes sharded
// (its rewrite of the pcall matched).
func TestNoticesAreBestEffort(t *testing.T) {
	for _, tc := range []struct {
		name           string
		src            string
		plain, sharded string // script hashes
	}{
		{"acquire.lua", acquireLua, plainScripts.acquire.Hash(), shardedScripts.acquire.Hash()},
		{"release.lua", releaseLua, plainScripts.release.Hash(), shardedScripts.release.Hash()},
		{"release_fair.lua", releaseFairLua, plainScripts.releaseFair.Hash(), shardedScripts.releaseFair.Hash()},
		{"leave_fair.lua", leaveFairLua, plainScripts.leaveFair.Hash(), shardedScripts.leaveFair.Hash()},
		{"handover_fair.lua", handoverFairLua, plainScripts.handoverFair.Hash(), shardedScripts.handoverFair.Hash()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := strings.Count(tc.src, "publish'")
			guarded := strings.Count(tc.src, "redis.pcall('publish'")
			if all == 0 || guarded != all {
				t.Errorf("publishes through redis.pcall: got %d of %d, want all (and at least one)", guarded, all)
			}
			if tc.plain == tc.sharded {
				t.Errorf("the Cluster flavour is the plain script: want SPUBLISH in place of PUBLISH")
			}
		})
	}
}

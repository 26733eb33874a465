package padlock

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// How one deployment takes and lets go of a set's keys, one script per
// hash slot (lua/multi_acquire.lua, lua/multi_release.lua), for AcquireAll
// (multilock.go).

var (
	//go:embed lua/multi_acquire.lua
	multiAcquireLua string
	//go:embed lua/multi_release.lua
	multiReleaseLua string

	multiPlain   = newMultiScripts(false)
	multiSharded = newMultiScripts(true)
)

type multiScripts struct{ acquire, release *script }

// newMultiScripts returns the scripts in the flavour of the deployment,
// as newPublishingScripts does: SPUBLISH on Cluster.
func newMultiScripts(sharded bool) *multiScripts {
	flavour := func(src string) *script {
		if sharded {
			src = strings.ReplaceAll(src, "redis.pcall('publish'", "redis.pcall('spublish'")
		}
		return newScript(grantLua + src)
	}
	// The release grants keys at release as a single key's does (bids.lua).
	return &multiScripts{acquire: flavour(claimLua + multiAcquireLua), release: flavour(bidsLua + multiReleaseLua)}
}

func (s single) multiScripts() *multiScripts {
	if s.scripts == shardedScripts {
		return multiSharded
	}
	return multiPlain
}

// acquireSlot runs multi_acquire.lua on ids, whose keys share one slot.
func (s single) acquireSlot(ctx context.Context, ids []*lockID, lockerID any, waiting bool, held string) (slotGrant, error) {
	keys, args, err := slotAttempt(ids, lockerID, waiting, held)
	if err != nil {
		return slotGrant{}, err
	}
	return slotGrantOf(ids, s.multiScripts().acquire.run(ctx, s.client, s.retries, keys, args...))
}

// slotAttempt returns the keys and arguments of multi_acquire.lua for
// ids, claiming each (see mintID), with held the token of a lock the set
// takes over, if not "".
func slotAttempt(ids []*lockID, lockerID any, waiting bool, held string) ([]string, []any, error) {
	keys := make([]string, len(ids)+1, len(ids)+2)
	for i, id := range ids {
		if !id.claim() {
			return nil, nil, errTokenReused
		}
		keys[i] = id.lockKey()
	}
	keys[len(ids)] = ids[0].keys[1] // the slot's fence counter
	mark := "0"
	if waiting {
		// Refused if a rollback buried it (lua/claim.lua).
		mark = "2"
		keys = append(keys, ids[0].lostKey())
	}
	args := []any{ids[0].token, ids[0].argv[1], lockerID, mark}
	if held != "" {
		args = append(args, held)
	}
	return keys, args, nil
}

// slotGrantOf reads multi_acquire.lua's reply for ids.
func slotGrantOf(ids []*lockID, cmd *redis.Cmd) (slotGrant, error) {
	reply, err := cmd.Slice()
	if err != nil {
		return slotGrant{}, err
	}
	nums := make([]int64, len(reply))
	for i, r := range reply {
		v, ok := r.(int64)
		if !ok {
			return slotGrant{}, fmt.Errorf("padlock: unexpected multi-key acquire reply %v", reply)
		}
		nums[i] = v
	}
	switch {
	case len(nums) == 2 && nums[0] < 0 && nums[1] >= 1 && int(nums[1]) <= len(ids):
		return slotGrant{busy: int(nums[1]) - 1, holderTTL: time.Duration(-1-nums[0]) * time.Millisecond}, nil
	case len(nums) == len(ids) && nums[0] > 0:
		return slotGrant{fences: nums}, nil
	}
	return slotGrant{}, fmt.Errorf("padlock: unexpected multi-key acquire reply %v", reply)
}

// releaseSlot runs multi_release.lua on ids, whose keys share one slot;
// with bury, the rollback of a waiting attempt whose reply was lost, it
// also buries the attempt's token (lua/claim.lua).
func (s single) releaseSlot(ctx context.Context, ids []*lockID, notify []bool, bury bool) ([]bool, error) {
	keys := make([]string, len(ids), 2*len(ids)+1)
	flags := make([]byte, len(ids))
	for i, id := range ids {
		keys[i] = id.lockKey()
		flags[i] = '0'
		if notify[i] {
			flags[i] = '1'
		}
	}
	args := []any{ids[0].token, string(flags), ""}
	if s.self != nil {
		// Grants at release: each key a waiter asked for goes to the bid
		// of the Locker next in turn.
		for _, id := range ids {
			keys = append(keys, id.bidsKey())
		}
		args = append(args, s.self)
	}
	if bury {
		keys = append(keys, ids[0].lostKey())
		args[2] = ids[0].ttl.Milliseconds()
	}
	reply, err := s.multiScripts().release.run(ctx, s.client, s.retries, keys, args...).Int64Slice()
	if err != nil {
		return nil, err
	}
	if len(reply) != len(ids) {
		return nil, fmt.Errorf("padlock: unexpected multi-key release reply %v", reply)
	}
	held := make([]bool, len(ids))
	for i, r := range reply {
		held[i] = r == 1
	}
	return held, nil
}

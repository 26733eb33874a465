package fenced

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
)

// Input is one operation on the store, as a client invoked it.
type Input struct {
	Key   string
	Write bool
	Fence int64  // write only
	Value string // write only
}

// Output is what the client saw come back.
type Output struct {
	// Unknown is set when no answer came (the client was killed, or the
	// request failed): the operation may or may not have taken effect.
	// Such an operation's Return is math.MaxInt64.
	Unknown bool
	OK      bool   // write: accepted
	Fence   int64  // read: the register's fence
	Value   string // read: the register's value
}

// state is one register's state.
type state struct {
	fence int64
	value string
}

// Model is the sequential specification of one register of the store,
// partitioned by key: a history of the store is linearizable if and only if
// the answers it gave are those of the fencing rule (see the package
// comment) applied to the operations one at a time, in an order that keeps
// every operation that returned before another was invoked ahead of it.
// An accepted write whose fence is below one accepted before it, or a
// rejected write whose fence was high enough, makes a history fail.
var Model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(Input).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		parts := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, byKey[k])
		}
		return parts
	},
	Init: func() any { return state{} },
	Step: func(st, in, out any) (bool, any) {
		s, i, o := st.(state), in.(Input), out.(Output)
		if !i.Write {
			return o.Unknown || (o.Fence == s.fence && o.Value == s.value), s
		}
		accept := i.Fence == 0 || i.Fence >= s.fence
		next := s
		if accept {
			next.value = i.Value
			next.fence = max(s.fence, i.Fence)
		}
		if o.Unknown {
			// Linearized last, it constrains nothing; anywhere else it
			// took effect, by the rule.
			return true, next
		}
		return o.OK == accept, next
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(Input), out.(Output)
		res := "?"
		switch {
		case o.Unknown:
		case i.Write && o.OK:
			res = "ok"
		case i.Write:
			res = "rejected"
		default:
			res = fmt.Sprintf("(%d, %q)", o.Fence, o.Value)
		}
		if i.Write {
			return fmt.Sprintf("write(%s, fence %d, %q) -> %s", i.Key, i.Fence, i.Value, res)
		}
		return fmt.Sprintf("read(%s) -> %s", i.Key, res)
	},
	DescribeState: func(st any) string {
		s := st.(state)
		return fmt.Sprintf("fence %d, %q", s.fence, s.value)
	},
}

// Check reports whether history is linearizable under Model. It gives up
// after timeout, returning porcupine.Unknown.
func Check(history []porcupine.Operation, timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	return porcupine.CheckOperationsVerbose(Model, history, timeout)
}

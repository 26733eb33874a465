package explore

import (
	"math/rand/v2"
	"time"
)

// Kind is what the fault layer does to one command.
type Kind uint8

const (
	None Kind = iota
	// Stall sleeps between the caller's last check and the send: the
	// command runs late, and the caller waits for it.
	Stall
	// Lost runs the command and loses its reply: the caller sees a
	// timeout.
	Lost
	// Reset runs the command and then the connection drops: the caller
	// sees io.EOF (which padlock sends again).
	Reset
	// Delay gives the caller a timeout at once and runs the command
	// later, after commands sent after it.
	Delay
	// Slow runs the command at once and delays its reply: the caller
	// waits for it, past its context's deadline (go-redis reads until its
	// ReadTimeout), and gives up only at the ReadTimeout.
	Slow
	// Refused never reaches the server: the caller's connection was
	// refused (a server down or restarting, a full accept queue), and the
	// caller sees a dial error at once. Decide never returns it: the
	// hook draws it apart from the others (Plan.DecideRefused), for a
	// command Decide left without a fault.
	Refused
)

func (k Kind) String() string {
	return [...]string{"none", "stall", "lost", "reset", "delay", "slow", "refused"}[k]
}

// Fault is one decision: its kind and, for Stall and Delay, how long.
type Fault struct {
	Kind Kind
	D    time.Duration
}

// Plan turns a seed into fault decisions. Rate is the share of commands
// that meet a fault.
type Plan struct {
	Seed uint64
	Rate float64
	// Only, when not None, is the one kind of fault used.
	Only Kind
	// Latency is how long every command takes to reach the server. Not
	// zero: inside a bubble time stands still until every goroutine
	// waits, and padlock orders what it sees by when it sent it, so a
	// round trip must take some time, as on any network.
	Latency time.Duration
	// ConnRate is the share of script commands whose reply a client's
	// connection loses below go-redis (ConnLost, ConnReset): go-redis
	// itself sends such a command again unless told not to.
	ConnRate float64
	// ContextTimeout makes the clients set ContextTimeoutEnabled (as a
	// Redlock node's client must): a caller waits for a slow reply only
	// until its context's deadline, not go-redis's read timeout.
	ContextTimeout bool
	// Align, when not zero, makes every command reach the server at a
	// multiple of Align (after Latency): the commands of one step run at
	// one instant of the bubble's clock, so TIME repeats its reading for
	// them all, as a real server's does for commands within one
	// microsecond, or a coarse clock source's within its tick. Leases
	// still run on the exact clock.
	Align time.Duration
	// RefuseRate is the share of the commands that meet no other fault
	// whose connection is refused (Refused); after a faulted command on
	// the same client, refuseBurstRate. Drawn apart from the other
	// faults, so that a plan without it decides as before.
	RefuseRate float64
}

// refuseBurstRate is RefuseRate after a faulted command: the connection
// that lost a reply is often the one the server no longer accepts, and
// the clean-up that follows is refused with it.
const refuseBurstRate = 0.6

// DecideRefused reports whether the idx-th command of client, which met
// no other fault, is refused; after is as for Decide.
func (p *Plan) DecideRefused(client int, idx uint64, after bool) bool {
	if p.RefuseRate == 0 {
		return false
	}
	rate := p.RefuseRate
	if after {
		rate = max(rate, refuseBurstRate)
	}
	r := rand.New(rand.NewPCG(p.Seed^0x2545f491, uint64(client)<<40^idx))
	return r.Float64() < rate
}

// ConnFault is what a client's connection does to the reply of one
// script command, below go-redis.
type ConnFault uint8

const (
	ConnNone ConnFault = iota
	// ConnLost: the server runs the command; its reply never comes, and
	// go-redis's read ends at its deadline (a timeout).
	ConnLost
	// ConnReset: the server runs the command; the connection closes as
	// its reply arrives (io.EOF).
	ConnReset
)

func (k ConnFault) String() string { return [...]string{"none", "lost", "reset"}[k] }

// DecideConn returns the connection fault for the idx-th script command
// written on connection conn of client.
func (p *Plan) DecideConn(client int, conn, idx uint64) ConnFault {
	if p.ConnRate == 0 {
		return ConnNone
	}
	r := rand.New(rand.NewPCG(p.Seed^0x5bd1e995, uint64(client)<<48^conn<<24^idx))
	if r.Float64() >= p.ConnRate {
		return ConnNone
	}
	return ConnLost + ConnFault(r.IntN(2))
}

// burstRate is the chance of a fault for a command that follows a
// faulted one on the same client: network trouble comes in bursts, and
// a lost reply's clean-up travels the same troubled network.
const burstRate = 0.4

// Decide returns the fault for the idx-th command of client; after
// says whether the command before it on that client met a fault.
func (p *Plan) Decide(client int, idx uint64, after bool) Fault {
	r := rand.New(rand.NewPCG(p.Seed, uint64(client)<<40^idx))
	rate := p.Rate
	if after {
		rate = max(rate, burstRate)
	}
	if r.Float64() >= rate {
		return Fault{}
	}
	k := p.Only
	if k == None {
		switch x := r.IntN(10); {
		case x < 3:
			k = Stall
		case x < 5:
			k = Lost
		case x < 6:
			k = Reset
		case x < 8:
			k = Delay
		default:
			k = Slow
		}
	}
	var d time.Duration
	switch k {
	case Stall:
		if r.IntN(2) == 0 {
			d = time.Duration(1+r.IntN(40)) * time.Millisecond
		} else {
			d = time.Duration(50+r.IntN(700)) * time.Millisecond
		}
	case Delay:
		d = time.Duration(5+r.IntN(1000)) * time.Millisecond
	case Slow:
		if r.IntN(2) == 0 {
			d = time.Duration(5+r.IntN(400)) * time.Millisecond
		} else {
			d = time.Duration(400+r.IntN(2200)) * time.Millisecond
		}
	}
	return Fault{Kind: k, D: d}
}

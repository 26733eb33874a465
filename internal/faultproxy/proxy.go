// Package faultproxy is a TCP proxy on loopback that puts network faults
// between a client and one server: replies delayed, replies lost after the
// server acted on the request, a partition, refused connections, and
// connections reset. It is for tests.
//
// A lost reply is the fault that SIGSTOP and SIGKILL of the server cannot
// model: the server ran the command, and the client cannot tell whether it
// did. DropReplies forwards a request, waits for the server's answer,
// swallows it and resets the client's connection.
//
// The proxy knows nothing of the protocol it carries: a "request" is what
// one read from the client returns, and its "reply" is what the server
// sends next. Request-reply clients such as go-redis send one command (or
// one pipeline) per write and wait for its answer, which is what that
// needs.
package faultproxy

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards the connections it accepts on 127.0.0.1 to one target
// address, injecting the faults its methods switch on. Its methods are safe
// for concurrent use. The zero value is not usable; call Start, and Close
// when done.
type Proxy struct {
	target string
	addr   string // where it listens, "127.0.0.1:port"

	replyDelay   atomic.Int64 // time.Duration
	requestDelay atomic.Int64 // time.Duration
	dropNext     atomic.Int64 // requests whose reply is yet to be dropped
	dropped      atomic.Int64 // replies dropped so far
	refuse       atomic.Bool

	mu          sync.Mutex
	ln          net.Listener // nil while Down
	dropMatch   []byte       // DropRepliesTo's filter; nil: every request
	links       map[*link]struct{}
	partitioned bool
	healed      chan struct{} // closed when a partition ends; nil while none
	closed      bool

	wg sync.WaitGroup // the accept loop and every link's pumps
}

// Start listens on a free port of 127.0.0.1 and forwards every connection
// to target, with no fault until one is switched on. The caller must Close
// the proxy.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), ln: ln, links: map[*link]struct{}{}}
	p.wg.Go(func() { p.accept(ln) })
	return p, nil
}

// Addr returns the address clients connect to, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.addr }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// DelayReplies holds every chunk the server sends for d before passing it
// on, from now on; 0 (the default) stops delaying. The server has acted
// on the request by then, so a client whose read timeout is shorter than
// d sees a failure for a command that ran.
func (p *Proxy) DelayReplies(d time.Duration) { p.replyDelay.Store(int64(d)) }

// DelayRequests holds every chunk a client sends for d before forwarding
// it, from now on; 0 (the default) stops delaying.
func (p *Proxy) DelayRequests(d time.Duration) { p.requestDelay.Store(int64(d)) }

// DropReplies loses the replies of the next n requests, on any connection:
// each is forwarded to the server, and when the server's reply comes it is
// swallowed and the client's connection is reset. The client sees its
// connection break after the server ran the command.
func (p *Proxy) DropReplies(n int) { p.DropRepliesTo(n, nil) }

// DropRepliesTo is DropReplies for the next n requests whose bytes contain
// match (a command name, a key); others pass. It replaces the filter of
// earlier calls; nil matches every request.
func (p *Proxy) DropRepliesTo(n int, match []byte) {
	p.mu.Lock()
	p.dropMatch = bytes.Clone(match)
	p.mu.Unlock()
	p.dropNext.Add(int64(n))
}

// Dropped returns how many replies DropReplies has dropped so far.
func (p *Proxy) Dropped() int { return int(p.dropped.Load()) }

// Partition cuts the proxy off, or heals it: while cut, connections are
// still accepted but nothing is forwarded either way, as when packets are
// lost on the wire. What was held back is delivered on heal, on every
// connection still open at either end, as TCP would retransmit it.
func (p *Proxy) Partition(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case cut && !p.partitioned:
		p.partitioned = true
		p.healed = make(chan struct{})
	case !cut && p.partitioned:
		p.partitioned = false
		close(p.healed)
		p.healed = nil
	}
}

// Refuse makes the proxy reset every new connection at once (on), or
// forward them again (off). Connections already open are not touched.
func (p *Proxy) Refuse(on bool) { p.refuse.Store(on) }

// Down stops listening (on), as a server that is down: a new connection
// is refused by the system (ECONNREFUSED), so the client's dial fails,
// and every open connection is broken, as Reset does. Off listens again
// on the same address. Unlike Refuse, a client's dials fail, which is
// what go-redis counts before it stops dialling for a while.
func (p *Proxy) Down(on bool) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	if on {
		ln := p.ln
		p.ln = nil
		p.mu.Unlock()
		if ln != nil {
			_ = ln.Close()
		}
		p.Reset()
		return nil
	}
	defer p.mu.Unlock()
	if p.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("faultproxy: listen again on %s: %w", p.addr, err)
	}
	p.ln = ln
	p.wg.Go(func() { p.accept(ln) })
	return nil
}

// Reset breaks every open connection: the client's end is reset (RST) and
// the server's closed. New connections are forwarded as before.
func (p *Proxy) Reset() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// Conns returns how many connections are open through the proxy.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Close stops accepting, breaks every connection, heals a partition so
// nothing waits on it, and returns once every goroutine of the proxy is
// done. Closing twice is fine.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	ln := p.ln
	p.ln = nil
	p.mu.Unlock()
	var err error
	if ln != nil {
		err = ln.Close()
	}
	p.Partition(false)
	p.Reset()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(5 * time.Millisecond) // e.g. out of file descriptors
			continue
		}
		if p.refuse.Load() {
			resetConn(c)
			continue
		}
		// Dial from the accept loop: the link must be registered before
		// Close's Reset can miss it.
		s, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			resetConn(c) // as a refused connection looks from the client
			continue
		}
		l := &link{p: p, client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			resetConn(c)
			_ = s.Close()
			continue
		}
		p.links[l] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go l.requests()
		go l.replies()
	}
}

// gate returns a channel that is closed once no partition holds traffic
// back: at once when there is none.
func (p *Proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.healed == nil {
		return closedChan
	}
	return p.healed
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// link is one proxied connection and its two pumps.
type link struct {
	p              *Proxy
	client, server net.Conn
	doomed         atomic.Bool // the next reply is to be dropped
	once           sync.Once
}

// requests pumps client → server.
func (l *link) requests() {
	defer l.p.wg.Done()
	defer l.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := l.client.Read(buf)
		if n > 0 {
			<-l.p.gate()
			if d := time.Duration(l.p.requestDelay.Load()); d > 0 {
				time.Sleep(d)
			}
			if l.p.takeDrop(buf[:n]) {
				l.doomed.Store(true)
			}
			if _, werr := l.server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			// The client is gone; let the server finish what it was sent
			// (its reply has nobody to go to), then close.
			return
		}
	}
}

// replies pumps server → client.
func (l *link) replies() {
	defer l.p.wg.Done()
	defer l.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := l.server.Read(buf)
		if n > 0 {
			if l.doomed.Load() {
				// The server has acted on the request: lose its answer.
				l.p.dropped.Add(1)
				return
			}
			<-l.p.gate()
			if d := time.Duration(l.p.replyDelay.Load()); d > 0 {
				time.Sleep(d)
			}
			if _, werr := l.client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// takeDrop claims one pending reply drop for request, if there is one
// and request matches the filter.
func (p *Proxy) takeDrop(request []byte) bool {
	if p.dropNext.Load() <= 0 {
		return false // the common case, without the lock
	}
	p.mu.Lock()
	match := p.dropMatch
	p.mu.Unlock()
	if match != nil && !bytes.Contains(request, match) {
		return false
	}
	for {
		n := p.dropNext.Load()
		if n <= 0 {
			return false
		}
		if p.dropNext.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// close resets the client's end and closes the server's, once; both
// pumps then end.
func (l *link) close() {
	l.once.Do(func() {
		resetConn(l.client)
		_ = l.server.Close()
		l.p.mu.Lock()
		delete(l.p.links, l)
		l.p.mu.Unlock()
	})
}

// resetConn closes c with an RST rather than a FIN, as a broken network
// path or a crashed peer looks to the other end.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

package main

import (
	"context"
	"net"
	"sync"
	"time"
)

// slowDialer returns a go-redis Dialer whose connections simulate a network
// of the given round-trip time: a reply is not read before rtt has passed
// since the request was written. The server still answers at once; only the
// client waits, as it would for a server farther away. Messages a server
// pushes unasked (pub/sub) are not delayed.
func slowDialer(rtt time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &slowConn{Conn: c, rtt: rtt}, nil
	}
}

type slowConn struct {
	net.Conn
	rtt time.Duration

	mu  sync.Mutex
	due time.Time // no reply is returned before this
}

func (c *slowConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.due = time.Now().Add(c.rtt)
	c.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *slowConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	due := c.due
	c.mu.Unlock()
	if d := time.Until(due); d > 0 {
		time.Sleep(d)
	}
	return n, err
}

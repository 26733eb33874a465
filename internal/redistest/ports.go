package redistest

import (
	"errors"
	"fmt"
	"net"
)

// clusterBusOffset is how far above its client port a cluster node listens
// for its peers; both ports must be free.
const clusterBusOffset = 10000

// freePorts finds n distinct free loopback ports. It holds a listener on
// every port until all are found, so the n ports differ from each other;
// they are released before redis-server binds them, and another process may
// take one in between, which the caller retries. With bus set, port+10000
// must be free as well, for a cluster node's bus.
func freePorts(n int, bus bool) ([]int, error) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries >= 100*n {
			return nil, errors.New("redistest: no free loopback ports")
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("redistest: find a free port: %w", err)
		}
		held = append(held, l)
		port := l.Addr().(*net.TCPAddr).Port
		if bus {
			if port+clusterBusOffset > 65535 {
				continue
			}
			bl, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+clusterBusOffset))
			if err != nil {
				continue
			}
			held = append(held, bl)
		}
		ports = append(ports, port)
	}
	return ports, nil
}

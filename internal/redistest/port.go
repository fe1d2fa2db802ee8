package redistest

import (
	"fmt"
	"net"
	"sync"
)

// clusterBusOffset is how far above its client port a cluster node listens
// for the cluster bus (Redis's default, which works on every version that
// has Redis Cluster).
const clusterBusOffset = 10000

// reserved holds the ports of the servers this process has started and not
// yet closed, so that two servers started at the same time in parallel tests
// are never given the same port by the kernel. Ports taken by other processes
// are caught later: the server fails to bind and Start retries.
var reserved = struct {
	sync.Mutex
	ports map[int]bool
}{ports: make(map[int]bool)}

// reservePorts picks a free loopback port by listening on 127.0.0.1:0 and
// closing the listener, and reserves it. With bus set, it picks a port whose
// cluster bus port (port+10000) is free as well and reserves both. The
// returned slice is what releasePorts takes back.
func reservePorts(bus bool) ([]int, error) {
	reserved.Lock()
	defer reserved.Unlock()

	var lastErr error
	for range 100 {
		port, err := freePort("127.0.0.1:0")
		if err != nil {
			lastErr = err
			continue
		}
		if reserved.ports[port] {
			continue
		}
		ports := []int{port}
		if bus {
			busPort := port + clusterBusOffset
			if busPort > 65535 || reserved.ports[busPort] {
				continue
			}
			if _, err := freePort(fmt.Sprintf("127.0.0.1:%d", busPort)); err != nil {
				lastErr = err
				continue
			}
			ports = append(ports, busPort)
		}
		for _, p := range ports {
			reserved.ports[p] = true
		}
		return ports, nil
	}
	return nil, fmt.Errorf("redistest: no free loopback port found: %v", lastErr)
}

// releasePorts gives back ports taken by reservePorts.
func releasePorts(ports []int) {
	reserved.Lock()
	defer reserved.Unlock()
	for _, p := range ports {
		delete(reserved.ports, p)
	}
}

// freePort listens on addr, closes the listener and returns its port.
func freePort(addr string) (int, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, err
	}
	return port, nil
}

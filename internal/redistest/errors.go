package redistest

import "errors"

var (
	// errServerNotFound is what a test fails with when redis-server is not
	// installed. The message says exactly how to install it.
	errServerNotFound = errors.New("redis-server not found: install it with `apt-get install -y redis-server` (or run `make test`, which installs it)")

	// errCLINotFound is the same for redis-cli, which StartCluster needs to
	// create the cluster; the redis-server package brings it along.
	errCLINotFound = errors.New("redis-cli not found: install it with `apt-get install -y redis-server` (or run `make test`, which installs it)")

	// errAddrInUse means redis-server exited because its port (or, for a
	// cluster node, its cluster bus port) was taken between the moment it was
	// picked and the moment the server bound it. Start retries on it.
	errAddrInUse = errors.New("redistest: address already in use")

	// errNotRunning is returned by operations that need a live server.
	errNotRunning = errors.New("redistest: server is not running")
)

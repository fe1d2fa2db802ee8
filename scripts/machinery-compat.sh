#!/usr/bin/env bash
# machinery-compat: the drop-in promise, tested with machinery's own code.
#
# machinery v1's integration tests (suite, eager, redis, redis over a Unix
# socket, pending tasks, workers that register different tasks) and its
# example/redis program are taken from the Go module proxy, their import
# prefix github.com/RichardKnop/machinery/v1 rewritten to
# github.com/b6192125/machinist/v1 (and the tests' import of machinery's
# example tasks to the copy taken with them) and nothing else, then built against this
# checkout and run against two redis-servers of their own (TCP and a Unix
# socket). Nothing of machinery is kept in this repository.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
VERSION=${MACHINERY_VERSION:-v1.10.8}
WORK=$(mktemp -d)
PIDS=()
cleanup() {
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT
export GOFLAGS=-mod=mod GOWORK=off

cd "$WORK"
SRC=$(go mod download -json "github.com/RichardKnop/machinery@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$SRC/integration-tests" ] || { echo "machinery-compat: no source for machinery $VERSION" >&2; exit 1; }

mkdir -p m/it m/example/redis m/example/tasks m/example/tracers
cat > m/go.mod <<MOD
module compat

go 1.26

// machinery v1.10.8's own versions of what its tests and example import,
// so that nothing newer is fetched.
require (
	github.com/b6192125/machinist v0.0.0
	github.com/opentracing/opentracing-go v1.2.0
	github.com/stretchr/testify v1.8.1
	github.com/urfave/cli v1.22.5
)

replace github.com/b6192125/machinist => $ROOT
MOD
rewrite() {
	sed -e 's#github.com/RichardKnop/machinery/v1#github.com/b6192125/machinist/v1#g' \
		-e 's#github.com/RichardKnop/machinery/example/#compat/example/#g' "$1" > "$2"
}
for f in suite_test.go eager_eager_test.go redis_redis_test.go redis_socket_test.go \
	redis_get_pending_tasks_test.go worker_only_consumes_registered_tasks_test.go; do
	rewrite "$SRC/integration-tests/$f" "m/it/$f"
done
rewrite "$SRC/example/redis/main.go" m/example/redis/main.go
rewrite "$SRC/example/tasks/tasks.go" m/example/tasks/tasks.go
rewrite "$SRC/example/tracers/jaeger.go" m/example/tracers/jaeger.go

cd m
if ! go mod tidy >"$WORK/tidy.log" 2>&1; then
	cat "$WORK/tidy.log" >&2
	exit 1
fi
echo "machinery-compat: machinery $VERSION, build"
go vet ./...
go build -o /dev/null ./example/redis

SOCK=$WORK/redis.sock
# A loopback port for the TCP server: one nothing answers on, tried again
# with another when the server cannot bind it (taken meanwhile).
PORT=
for _ in $(seq 20); do
	p=$((20000 + RANDOM % 40000))
	(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && continue
	redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" >"$WORK/tcp.log" 2>&1 &
	pid=$!
	for _ in $(seq 200); do
		if redis-cli -p "$p" ping >/dev/null 2>&1; then
			PORT=$p
			break
		fi
		kill -0 "$pid" 2>/dev/null || break # it exited: the port was taken
		sleep 0.05
	done
	if [ -n "$PORT" ]; then
		PIDS+=("$pid")
		break
	fi
	# Under set -e: the server may have exited already, and wait returns
	# its status.
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
done
if [ -z "$PORT" ]; then
	echo "machinery-compat: redis-server did not start on a loopback port" >&2
	cat "$WORK/tcp.log" >&2
	exit 1
fi
redis-server --port 0 --unixsocket "$SOCK" --unixsocketperm 700 --save '' --appendonly no --dir "$WORK" >"$WORK/sock.log" 2>&1 &
PIDS+=($!)
ready=
for _ in $(seq 200); do
	if redis-cli -s "$SOCK" ping >/dev/null 2>&1; then
		ready=1
		break
	fi
	sleep 0.05
done
if [ -z "$ready" ]; then
	echo "machinery-compat: redis-server did not start on $SOCK" >&2
	cat "$WORK/sock.log" >&2
	exit 1
fi

echo "machinery-compat: machinery's integration tests"
REDIS_URL=127.0.0.1:$PORT REDIS_SOCKET=$SOCK go test -count=1 -timeout 300s ${COMPAT_TESTFLAGS:-} ./it

#!/usr/bin/env bash
# ensure-redis.sh makes sure redis-server and redis-cli are on PATH, for the
# tests, which start their own servers (internal/redistest).
#
#   - both present: exit 0;
#   - missing, as root: install the redis-server package with apt-get (it
#     brings redis-cli) and check both commands now exist;
#   - missing, not root: say on stderr what to install and exit 1.
#
# It never starts a server: the package's service is kept from starting
# during the installation (policy-rc.d), and no redis-server is run here.
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1; }

if have redis-server && have redis-cli; then
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	{
		echo "ensure-redis: the tests need redis-server and redis-cli on PATH; install them with:"
		echo "  sudo apt-get install -y redis-server   # Debian, Ubuntu"
		echo "  brew install redis                     # macOS"
	} >&2
	exit 1
fi

if ! have apt-get; then
	echo "ensure-redis: apt-get not found; install redis-server and redis-cli with your package manager" >&2
	exit 1
fi

# Debian's maintainer scripts start the redis-server service unless
# policy-rc.d forbids it (exit 101). Add one for the installation if there
# is none, and remove it afterwards.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 755 "$policy"
	trap 'rm -f "$policy"' EXIT
fi

echo "ensure-redis: installing redis-server with apt-get" >&2
apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server

for cmd in redis-server redis-cli; do
	if ! have "$cmd"; then
		echo "ensure-redis: $cmd still not on PATH after installing redis-server" >&2
		exit 1
	fi
done

#!/usr/bin/env bash
# cleave-server with clients nobody here wrote: a scripted redis-cli
# session diffed against its expected replies, redis-benchmark short runs
# that must finish with no error, and redis-py's tests under pytest (in a
# virtualenv under target/, from PyPI). Installs what is missing
# (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cargo build --release -q -p cleave-server
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
work=$(mktemp -d)
trap 'stop_server_on_exit; rm -rf "$work"' EXIT
port=$(free_port)
start_server cleave "$work/data" "$port" "$work/log"
echo "redis-clients: cleave-server on port $port"

# 1. redis-cli: every reply as expected (the file was checked against
# redis-server 7.0, which differs only where cleave-server says so in
# docs/server.md: field order of HGETALL, SELECT of databases beyond 0).
sessions=crates/cleave-server/tests/redis-cli
redis-cli -p "$port" < "$sessions/session.txt" > "$work/session.out"
diff -u "$sessions/session.expected" "$work/session.out"
redis-cli -p "$port" flushdb > /dev/null
echo "redis-clients: redis-cli session matches"

# 2. redis-benchmark: short runs, with pipelining, must show no error.
bench() {
  local out
  out=$(redis-benchmark -p "$port" "$@" -q 2>&1 | tr '\r' '\n')
  if echo "$out" | grep -qi "error"; then
    echo "$out" >&2
    echo "redis-clients: redis-benchmark $* reported errors" >&2
    exit 1
  fi
  echo "$out" | grep "requests per second"
}
bench -t set,get,incr,mset,hset -n 10000 -P 16
bench -t set,get -n 2000 -d 16384 -c 10
[ "$(redis-cli -p "$port" get nosuchkey)" = "" ]

# 3. redis-py under pytest.
venv=target/redis-py-venv
if [ ! -x "$venv/bin/pytest" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "redis==8.1.0" "pytest==9.2.0"
fi
CLEAVE_SERVER_PORT=$port "$venv/bin/python" -m pytest -q -p no:cacheprovider crates/cleave-server/tests/python

# SHUTDOWN closes the database and ends the process cleanly.
redis-cli -p "$port" shutdown > /dev/null 2>&1 || true
wait "$server_pid"
server_pid=
echo "redis-clients: all passed"

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
# The default test list: strings, lists, sets, hashes, sorted sets.
bench -n 20000
redis-cli -p "$port" flushdb > /dev/null

# redis-cli's key-space tools: --scan lists every key, --bigkeys sizes each
# type with its own count command.
redis-cli -p "$port" rpush list a b c > /dev/null
redis-cli -p "$port" sadd set a b > /dev/null
redis-cli -p "$port" zadd zset 1 a > /dev/null
redis-cli -p "$port" hset hash f v > /dev/null
redis-cli -p "$port" set string hello > /dev/null
[ "$(redis-cli -p "$port" --scan | sort | tr '\n' ' ')" = "hash list set string zset " ]
bigkeys=$(redis-cli -p "$port" --bigkeys)
for line in "list found '\"list\"' has 3 items" "set found '\"set\"' has 2 members" \
  "zset found '\"zset\"' has 1 members" "string found '\"string\"' has 5 bytes"; do
  echo "$bigkeys" | grep -qF "$line" || { echo "$bigkeys" >&2; echo "redis-clients: --bigkeys lacks: $line" >&2; exit 1; }
done
redis-cli -p "$port" flushdb > /dev/null
echo "redis-clients: redis-cli --scan and --bigkeys work"
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

# 4. A three-member group (docs/cluster.md): redis-cli -c follows the
# redirects, redis-py's RedisCluster finds the leader from CLUSTER SLOTS.
ports=() raft_ports=()
for i in 1 2 3; do
  ports+=("$(free_port)")
  raft_ports+=("$(free_port)")
done
cluster_pids=()
trap '[ ${#cluster_pids[@]} -eq 0 ] || kill "${cluster_pids[@]}" 2>/dev/null || true; stop_server_on_exit; rm -rf "$work"' EXIT
for i in 1 2 3; do
  peers=()
  for j in 1 2 3; do
    [ "$j" = "$i" ] && continue
    peers+=(--peer "$j=127.0.0.1:${raft_ports[$((j - 1))]},127.0.0.1:${ports[$((j - 1))]}")
  done
  target/release/cleave-server --dir "$work/member$i" --cluster --node-id "$i" \
    --port "${ports[$((i - 1))]}" --raft-port "${raft_ports[$((i - 1))]}" "${peers[@]}" \
    > "$work/member$i.log" 2>&1 &
  cluster_pids+=($!)
done
for port in "${ports[@]}"; do
  for _ in $(seq 100); do
    redis-cli -p "$port" ping > /dev/null 2>&1 && break
    sleep 0.1
  done
done
target/release/cleave-server cluster --port "${ports[0]}" init > /dev/null
for _ in $(seq 300); do
  redis-cli -p "${ports[2]}" cluster info | grep -q "^raft_leader_id:[0-9]" && break
  sleep 0.1
done
echo "redis-clients: a group on ports ${ports[*]}"
[ "$(redis-cli -c -p "${ports[2]}" set via-follower 1)" = "OK" ]
[ "$(redis-cli -c -p "${ports[1]}" get via-follower)" = "1" ]
CLEAVE_CLUSTER_PORTS=$(IFS=,; echo "${ports[*]}") "$venv/bin/python" -m pytest -q \
  -p no:cacheprovider crates/cleave-server/tests/python_cluster
kill "${cluster_pids[@]}"
wait "${cluster_pids[@]}" 2> /dev/null || true
cluster_pids=()
echo "redis-clients: all passed"

#!/usr/bin/env bash
# redis-benchmark SET then GET against cleave-server and against
# redis-server with `appendonly yes`, `appendfsync everysec`, one server at
# a time on this machine, for each value size; prints ops/s, P50 and P99,
# each server's peak resident memory and the disk its data directory takes.
#
#   scripts/redis-bench.sh                         1 KiB and 16 KiB values
#   BENCH_SIZES="1024" BENCH_REQUESTS=1000000 BENCH_KEYSPACE=200000 scripts/redis-bench.sh
#   BENCH_SERVERS=cleave BENCH_CLEAVE_FLAGS="--appendfsync always" scripts/redis-bench.sh
#   BENCH_TTL=10 BENCH_REQUESTS=2000000 scripts/redis-bench.sh
#   BENCH_TESTS=default BENCH_REQUESTS=100000 scripts/redis-bench.sh
#
# With BENCH_TESTS=default the run is redis-benchmark's own default test
# list (PING to MSET, lists, sets, sorted sets; its 3-byte values and
# single keys, no -r), one value size ("default" in the results).
#
# With BENCH_TTL=T the one test is `SET key:__rand_int__ <value> EX T`
# (redis-benchmark's own command line; "set_ex" in the results), and the
# data directory is measured twice: when the writes end, and again 2 x T
# later, when every key has expired, to show what each server gives back.
#
# 50 clients, pipelining 16 (BENCH_CLIENTS, BENCH_PIPELINE), keys drawn
# from BENCH_KEYSPACE. Results: target/redis-bench/summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."

tests=${BENCH_TESTS:-}
sizes=${BENCH_SIZES:-"1024 16384"}
[ "$tests" = default ] && sizes=default
requests=${BENCH_REQUESTS:-500000}
keyspace=${BENCH_KEYSPACE:-100000}
clients=${BENCH_CLIENTS:-50}
pipeline=${BENCH_PIPELINE:-16}
ttl=${BENCH_TTL:-}
servers=${BENCH_SERVERS:-"cleave redis"}
out=target/redis-bench
mkdir -p "$out"

scripts/install-deps.sh
cargo build --release -q -p cleave-server

# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
work=$(mktemp -d)
trap 'stop_server_on_exit; rm -rf "$work"' EXIT

: > "$out/results.csv"
for size in $sizes; do
  for server in $servers; do
    port=$(free_port)
    flags=()
    # shellcheck disable=SC2206
    [ "$server" = cleave ] && flags=(${BENCH_CLEAVE_FLAGS:-})
    start_server "$server" "$work/$server-$size" "$port" "$work/server.log" "${flags[@]}"
    echo "redis-bench: $server, $size-byte values"
    if [ "$tests" = default ]; then
      redis-benchmark -p "$port" -n "$requests" -c "$clients" -P "$pipeline" --csv 2>/dev/null |
        grep -v '^"test"' | sed "s/^/$server,$size,/" >> "$out/results.csv"
      ended=
      sleep 2
    elif [ -n "$ttl" ]; then
      value=$(head -c "$size" /dev/zero | tr '\0' v)
      # The CSV names a test by its command line, value included.
      redis-benchmark -p "$port" -n "$requests" -r "$keyspace" -c "$clients" -P "$pipeline" \
        --csv SET 'key:__rand_int__' "$value" EX "$ttl" 2>/dev/null | tail -n 1 |
        sed -E "s/^\"[^\"]*\"/\"set_ex\"/; s/^/$server,$size,/" >> "$out/results.csv"
      ended=$(du -sb "$work/$server-$size" | cut -f1)
      sleep $((2 * ttl))
    else
      for test in set get; do
        redis-benchmark -p "$port" -t "$test" -n "$requests" -r "$keyspace" -d "$size" \
          -c "$clients" -P "$pipeline" --csv 2>/dev/null | tail -n 1 |
          sed "s/^/$server,$size,/" >> "$out/results.csv"
      done
      ended=
      sleep 2
    fi
    peak=$(server_peak_kib)
    stop_server "$port"
    disk=$(du -sb "$work/$server-$size" | cut -f1)
    echo "$server,$size,memory,$peak,$disk,$ended" >> "$out/results.csv"
  done
done

python3 - "$out" <<'PY'
import csv, sys
out = sys.argv[1]
rows = list(csv.reader(open(f"{out}/results.csv")))
table = ["| server | value | test | ops/s | P50 ms | P99 ms |", "|---|---|---|---|---|---|"]
mem = []
for r in rows:
    if r[2] == "memory":
        what = "default test list" if r[1] == "default" else f"{r[1]}-byte values"
        line = f"{r[0]}, {what}: peak RSS {int(r[3]) / 1024:.1f} MiB, data directory {int(r[4]) / 2**20:.1f} MiB"
        if len(r) > 5 and r[5]:
            line = (f"{r[0]}, {r[1]}-byte values: peak RSS {int(r[3]) / 1024:.1f} MiB, data directory "
                    f"{int(r[5]) / 2**20:.1f} MiB when the writes ended, {int(r[4]) / 2**20:.1f} MiB "
                    "once every key had expired")
        mem.append(line)
        continue
    # server, size, "test", "rps", "avg", "min", "p50", "p95", "p99", "max"
    table.append(f"| {r[0]} | {r[1]} | {r[2]} | {float(r[3]):,.0f} | {r[6]} | {r[8]} |")
text = "\n".join(table + [""] + mem)
print(text)
open(f"{out}/summary.md", "w").write(text + "\n")
PY

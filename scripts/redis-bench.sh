#!/usr/bin/env bash
# redis-benchmark SET then GET against cleave-server and against
# redis-server with `appendonly yes`, `appendfsync everysec`, one server at
# a time on this machine, for each value size; prints ops/s, P50 and P99,
# each server's peak resident memory and the disk its data directory takes.
#
#   scripts/redis-bench.sh                         1 KiB and 16 KiB values
#   BENCH_SIZES="1024" BENCH_REQUESTS=1000000 BENCH_KEYSPACE=200000 scripts/redis-bench.sh
#   BENCH_SERVERS=cleave BENCH_CLEAVE_FLAGS="--appendfsync always" scripts/redis-bench.sh
#
# 50 clients, pipelining 16 (BENCH_CLIENTS, BENCH_PIPELINE), keys drawn
# from BENCH_KEYSPACE. Results: target/redis-bench/summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."

sizes=${BENCH_SIZES:-"1024 16384"}
requests=${BENCH_REQUESTS:-500000}
keyspace=${BENCH_KEYSPACE:-100000}
clients=${BENCH_CLIENTS:-50}
pipeline=${BENCH_PIPELINE:-16}
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
    for test in set get; do
      redis-benchmark -p "$port" -t "$test" -n "$requests" -r "$keyspace" -d "$size" \
        -c "$clients" -P "$pipeline" --csv 2>/dev/null | tail -n 1 |
        sed "s/^/$server,$size,/" >> "$out/results.csv"
    done
    sleep 2
    peak=$(server_peak_kib)
    stop_server "$port"
    disk=$(du -sb "$work/$server-$size" | cut -f1)
    echo "$server,$size,memory,$peak,$disk" >> "$out/results.csv"
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
        mem.append(f"{r[0]}, {r[1]}-byte values: peak RSS {int(r[3]) / 1024:.1f} MiB, data directory {int(r[4]) / 2**20:.1f} MiB")
        continue
    # server, size, "test", "rps", "avg", "min", "p50", "p95", "p99", "max"
    table.append(f"| {r[0]} | {r[1]} | {r[2]} | {float(r[3]):,.0f} | {r[6]} | {r[8]} |")
text = "\n".join(table + [""] + mem)
print(text)
open(f"{out}/summary.md", "w").write(text + "\n")
PY

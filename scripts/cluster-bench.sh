#!/usr/bin/env bash
# The cost of replication: redis-benchmark SET then GET (1 KiB values, 50
# clients, pipelining 16) against one cleave-server (appendfsync always,
# then everysec) and against a three-member group on this machine (its
# leader), repeated and interleaved; then the time to elect a new leader
# after kill -9 of the old one, over a number of kills. Prints a table of
# medians (ops/s, P50, P99, the servers' CPU seconds and peak RSS summed
# over the processes) and the election times.
#
#   scripts/cluster-bench.sh
#   BENCH_REQUESTS=1000000 BENCH_REPEATS=5 BENCH_KILLS=20 scripts/cluster-bench.sh
#
# Results: target/cluster-bench/summary.md, raw rows in results.csv.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cargo build --release -q -p cleave-server
exec python3 scripts/lib/cluster_bench.py

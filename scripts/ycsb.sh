#!/usr/bin/env bash
# YCSB workloads A-F (YCSB core 0.17.0 from Maven Central, with our Jedis
# binding in crates/cleave-server/ycsb) against cleave-server and against
# redis-server with `appendonly yes`, `appendfsync everysec`, one after the
# other on this machine; prints both side by side, with each server's peak
# resident memory and its data directory's size after the load.
#
#   scripts/ycsb.sh                           100,000 records, 100,000 ops each
#   YCSB_RECORDS=1000000 YCSB_OPERATIONS=500000 YCSB_THREADS=16 scripts/ycsb.sh
#   YCSB_SERVERS=cleave YCSB_WORKLOADS="a c" scripts/ycsb.sh
#   YCSB_CLEAVE_FLAGS="--appendfsync always" scripts/ycsb.sh
#   YCSB_REDIS_FLAGS="--maxmemory 100mb" YCSB_WORKLOADS=c scripts/ycsb.sh
#
# Records are 1 KiB (10 fields of 100 bytes), requests zipfian (D: latest).
# Each server loads once, then runs A, B, C, F, D, E in that order, YCSB's
# recommended sequence (E after D, without a reload: D's inserts stay).
# Results: target/ycsb/<server>-<phase>.txt and target/ycsb/summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."

records=${YCSB_RECORDS:-100000}
operations=${YCSB_OPERATIONS:-100000}
threads=${YCSB_THREADS:-8}
servers=${YCSB_SERVERS:-"cleave redis"}
workloads=${YCSB_WORKLOADS:-"a b c f d e"}
out=target/ycsb
mkdir -p "$out"

scripts/install-deps.sh
cargo build --release -q -p cleave-server
ycsb=crates/cleave-server/ycsb
(cd "$ycsb" && mvn -q -B package dependency:copy-dependencies -DoutputDirectory=target/lib)
classpath="$ycsb/target/cleave-ycsb-0.1.0.jar:$ycsb/target/lib/*"

# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
work=$(mktemp -d)
trap 'stop_server_on_exit; rm -rf "$work"' EXIT

run_ycsb() {
  local port=$1 phase=$2 file=$3
  shift 3
  java -cp "$classpath" site.ycsb.Client "$phase" -s \
    -db cleave.ycsb.JedisHashClient \
    -P "$ycsb/workloads/common" -P "$file" \
    -p recordcount="$records" -p operationcount="$operations" \
    -p redis.port="$port" -threads "$threads" \
    -p measurementtype=hdrhistogram -p hdrhistogram.percentiles=50,99 \
    -p status.interval=10 "$@"
}

for server in $servers; do
  data="$work/$server"
  port=$(free_port)
  flags=()
  # shellcheck disable=SC2206
  case $server in
    cleave) flags=(${YCSB_CLEAVE_FLAGS:-}) ;;
    redis) flags=(${YCSB_REDIS_FLAGS:-}) ;;
  esac
  start_server "$server" "$data" "$port" "$work/server.log" "${flags[@]}"
  echo "ycsb: $server on port $port: load of $records records"
  run_ycsb "$port" -load "$ycsb/workloads/workloada" > "$out/$server-load.txt" 2> "$out/$server-load.log"
  sleep 2
  grep -E "^(VmHWM|VmRSS)" "/proc/$server_pid/status" > "$out/$server-memory.txt"
  du -sb "$data" | cut -f1 > "$out/$server-disk.txt"
  for w in $workloads; do
    echo "ycsb: $server: workload $w"
    run_ycsb "$port" -t "$ycsb/workloads/workload$w" > "$out/$server-$w.txt" 2> "$out/$server-$w.log"
  done
  grep -E "^(VmHWM|VmRSS)" "/proc/$server_pid/status" > "$out/$server-memory-end.txt"
  stop_server "$port"
done

python3 - "$out" "$servers" "load $workloads" <<'PY'
import re, sys
out, servers, phases = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()

def parse(path):
    ops, lat, failed = None, {}, 0
    for line in open(path):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3:
            continue
        section, name, value = parts
        if section == "[OVERALL]" and name == "Throughput(ops/sec)":
            ops = float(value)
        if section.endswith("-FAILED]") and name == "Operations":
            failed += int(value)
        m = re.match(r"(\d+)thPercentileLatency\(us\)", name)
        if m and section.strip("[]") in ("READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE"):
            lat.setdefault(section.strip("[]"), {})[m.group(1)] = float(value)
    return ops, lat, failed

def kib(path, field):
    for line in open(path):
        if line.startswith(field):
            return int(line.split()[1])
    return 0

rows = ["| phase | " + " | ".join(f"{s} ops/s | {s} P50/P99 µs" for s in servers) + " | ratio |",
        "|---|" + "---|---|" * len(servers) + "---|"]
for phase in phases:
    cells, rates = [], []
    for s in servers:
        ops, lat, failed = parse(f"{out}/{s}-{phase}.txt")
        rates.append(ops)
        lats = "; ".join(f"{k.lower()} {v.get('50', 0):.0f}/{v.get('99', 0):.0f}" for k, v in sorted(lat.items()))
        if failed:
            lats += f"; **{failed:,} failed**"
        cells += [f"{ops:,.0f}", lats]
    ratio = f"{rates[0] / rates[1]:.2f}" if len(rates) == 2 and rates[1] else ""
    rows.append(f"| {phase} | " + " | ".join(cells) + f" | {ratio} |")
rows.append("")
for s in servers:
    peak = kib(f"{out}/{s}-memory-end.txt", "VmHWM")
    after_load = kib(f"{out}/{s}-memory.txt", "VmRSS")
    disk = int(open(f"{out}/{s}-disk.txt").read())
    rows.append(f"{s}: RSS after load {after_load / 1024:.1f} MiB, peak {peak / 1024:.1f} MiB; data directory after load {disk / 2**20:.1f} MiB")
text = "\n".join(rows)
print(text)
open(f"{out}/summary.md", "w").write(text + "\n")
PY

#!/usr/bin/env bash
# Cross-checks cleave-bench's RocksDB adapter against Debian's db_bench: both
# run one workload with the same flags on the same librocksdb (7.8.3), each
# in a fresh directory, and the table says whether the adapter's ops/s are
# within 15% of db_bench's. A larger gap means the adapter or the driver
# costs something db_bench does not, or maps an option differently; the
# diff of the OPTIONS files both runs leave, printed at the end, shows the
# latter (see "Expected OPTIONS differences" below).
#
#   scripts/crosscheck_db_bench.sh
#
# Environment:
#   COMPARE_DIR   where databases and logs go (default: a new /tmp dir)
#   DB_BENCH      the db_bench binary (default: db_bench on PATH)
#   CLEAVE_BENCH  a cleave-bench built with --features rocksdb (default:
#                 cargo build --release -p cleave-bench --features rocksdb)
#   RUNS          runs per tool, interleaved db_bench, adapter, db_bench, ...
#                 (default 1); with more, the table shows medians too
#   NUM, READS    keys written by fillrandom (default 1,000,000: 1,048 B per
#                 entry, ~1 GiB) and gets by readrandom (default 200,000)
#
# The workload: fillrandom then readrandom in one process, 24 B keys, 1 KiB
# values, no compression, 64 MiB memtables and target files, bloom 10 bits,
# 8 MiB block cache, 2 background jobs, direct reads and direct flush and
# compaction writes (so the page cache does not serve reads), --seed=42.
# db_bench alone also gets --statistics=1, since the adapter always keeps
# statistics (its write-amplification counters come from them).
#
# Expected OPTIONS differences, which RocksDB's C API 7.8 cannot set (the
# adapter lists them in its header): delayed_write_rate, index_shortening,
# compaction_options_fifo, db_bench's ErrorHandlerListener, and
# filter_policy's spelling ("bloomfilter" through the C API's wrapper; the
# same 10-bit full filter, as the filter sizes in both LOGs show).
set -uo pipefail

die() { echo "crosscheck_db_bench: $*" >&2; exit 1; }

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
db_bench="${DB_BENCH:-db_bench}"
command -v "$db_bench" >/dev/null || die "db_bench not found (apt-get install rocksdb-tools)"
runs="${RUNS:-1}"
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer, got $runs"
num="${NUM:-1000000}"
reads="${READS:-200000}"
tolerance=0.15
benchmarks=(fillrandom readrandom)

if [[ -n "${CLEAVE_BENCH:-}" ]]; then
    cleave_bench="$CLEAVE_BENCH"
else
    (cd "$root" && cargo build --release -q -p cleave-bench --features rocksdb) ||
        die "building cleave-bench with --features rocksdb failed (needs librocksdb-dev, libclang-dev)"
    cleave_bench="${CARGO_TARGET_DIR:-$root/target}/release/cleave-bench"
fi
[[ -x "$cleave_bench" ]] || die "cleave-bench binary not found at $cleave_bench"

common=(
    "--benchmarks=$(IFS=,; echo "${benchmarks[*]}")"
    "--num=$num" "--reads=$reads"
    --key_size=24 --value_size=1024 --compression_type=none
    --write_buffer_size=67108864 --max_write_buffer_number=2
    --target_file_size_base=67108864 --max_bytes_for_level_base=268435456
    --max_background_jobs=2 --cache_size=8388608 --bloom_bits=10
    --use_direct_reads=1 --use_direct_io_for_flush_and_compaction=1
    --seed=42 --threads=1
)

work="${COMPARE_DIR:-$(mktemp -d /tmp/crosscheck_db_bench.XXXXXX)}"
mkdir -p "$work" || die "cannot create $work"
echo "crosscheck_db_bench: databases and logs in $work"
echo "crosscheck_db_bench: flags: ${common[*]}"

# Runs one tool once in a fresh directory; leaves <tool>-<run>.{out,err}.
run_one() {
    local tool="$1" run="$2" dir="$work/$1-db" status
    rm -rf "$dir"
    # The other tool's dirty pages would otherwise be written back during
    # this run.
    sync
    echo "crosscheck_db_bench: run $run: $tool" >&2
    if [[ "$tool" == db_bench ]]; then
        "$db_bench" --db="$dir" "${common[@]}" --statistics=1 \
            >"$work/$tool-$run.out" 2>"$work/$tool-$run.err"
    else
        "$cleave_bench" --engine=rocksdb --db="$dir" "${common[@]}" \
            >"$work/$tool-$run.out" 2>"$work/$tool-$run.err"
    fi
    status=$?
    if (( status != 0 )); then
        echo "crosscheck_db_bench: $tool run $run failed (exit $status); its stderr ends:" >&2
        tail -n 5 "$work/$tool-$run.err" >&2
    fi
}

# The ops/s of `bench` in a db_bench-format log, or n/a.
ops_per_second() {
    awk -v bench="$1" '$1 == bench && $2 == ":" && $4 == "micros/op" { ops = $5 }
        END { print (ops == "" ? "n/a" : ops) }' "$2" 2>/dev/null || echo n/a
}

# Prints "ratio verdict" for adapter/db_bench.
compare() {
    awk -v a="$2" -v d="$1" -v tolerance="$tolerance" 'BEGIN {
        if (a !~ /^[0-9.]+$/ || d !~ /^[0-9.]+$/ || d + 0 == 0) { print "n/a no"; exit }
        r = a / d
        printf "%.3f %s\n", r, (r >= 1 - tolerance && r <= 1 + tolerance) ? "yes" : "NO"
    }'
}

median() { sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) { print "n/a"; exit }
    print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for run in $(seq 1 "$runs"); do
    run_one db_bench "$run"
    run_one adapter "$run"
done

printf '\n%-12s %4s %16s %16s %8s %12s\n' benchmark run "db_bench ops/s" "adapter ops/s" ratio "within 15%"
all_within=1
for bench in "${benchmarks[@]}"; do
    db_values=() adapter_values=()
    for run in $(seq 1 "$runs"); do
        d="$(ops_per_second "$bench" "$work/db_bench-$run.out")"
        a="$(ops_per_second "$bench" "$work/adapter-$run.out")"
        db_values+=("$d") adapter_values+=("$a")
        read -r r verdict < <(compare "$d" "$a")
        printf '%-12s %4s %16s %16s %8s %12s\n' "$bench" "$run" "$d" "$a" "$r" "$verdict"
        (( runs == 1 )) && [[ "$verdict" != yes ]] && all_within=0
    done
    if (( runs > 1 )); then
        d="$(printf '%s\n' "${db_values[@]}" | grep -E '^[0-9.]+$' | median)"
        a="$(printf '%s\n' "${adapter_values[@]}" | grep -E '^[0-9.]+$' | median)"
        read -r r verdict < <(compare "$d" "$a")
        printf '%-12s %4s %16s %16s %8s %12s\n' "$bench" median "$d" "$a" "$r" "$verdict"
        [[ "$verdict" != yes ]] && all_within=0
    fi
done

echo
echo "OPTIONS differences (< db_bench, > adapter), last run:"
# RocksDB rewrites OPTIONS-<number> on open and option changes; the
# highest number is current.
newest_options() {
    local file
    file="$(printf '%s\n' "$1"/OPTIONS-* | sort -V | tail -n 1)"
    [[ -f "$file" ]] && echo "$file"
}
db_options="$(newest_options "$work/db_bench-db")"
adapter_options="$(newest_options "$work/adapter-db")"
if [[ -n "$db_options" && -n "$adapter_options" ]]; then
    diff <(grep -v '^#' "$db_options") <(grep -v '^#' "$adapter_options") && echo "  (none)"
else
    echo "  (an OPTIONS file is missing)"
fi

if (( all_within )); then
    echo "crosscheck_db_bench: the adapter is within 15% of db_bench"
else
    echo "crosscheck_db_bench: the adapter is NOT within 15% of db_bench on every benchmark"
    exit 2
fi

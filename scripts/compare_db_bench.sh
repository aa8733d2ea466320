#!/usr/bin/env bash
# Runs the same db_bench command line with RocksDB's db_bench (Debian's
# rocksdb-tools) and with cleave-bench, back to back, and prints a table per
# benchmark: ops/s, P99, write amplification, disk size, CPU and peak RSS.
#
#   scripts/compare_db_bench.sh --benchmarks=fillrandom,overwrite,readrandom,seekrandom \
#       --num=20000 --value_size=1024 --key_size=24 --compression_type=none --histogram=1
#
# Every flag is passed to both tools except --db, --use_existing_db, --json
# and --engine, which the script sets itself. Environment:
#   COMPARE_DIR      where databases and logs go (default: a new /tmp dir)
#   DB_BENCH         the db_bench binary (default: db_bench on PATH)
#   CLEAVE_BENCH     a prebuilt cleave-bench (default: cargo build --release)
#
# How it measures, identically for both tools:
# - Each benchmark runs as its own process, on the database the previous
#   benchmark left (fill benchmarks start from an empty directory, as
#   db_bench's own fill benchmarks do). So open and close are inside each
#   measurement, for both tools alike.
# - Device writes: GNU time's %O (ru_oublock, in 512-byte units), i.e. the
#   kernel's write_bytes for the process: bytes it sent, or dirtied for
#   writeback, to the block device, including writes later cancelled by
#   deleting the file. Write amp = device bytes / (ops x (key_size +
#   value_size)) for the write benchmarks.
# - Disk: `du -sb` of the database directory after the benchmark.
# - ops/s and P99: parsed from db_bench's result and Percentiles lines,
#   which cleave-bench prints in the same format.
set -uo pipefail

die() { echo "compare_db_bench: $*" >&2; exit 1; }

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
db_bench="${DB_BENCH:-db_bench}"
command -v "$db_bench" >/dev/null || die "db_bench not found (apt-get install rocksdb-tools)"
if [[ ! -x /usr/bin/time ]]; then
    echo "compare_db_bench: installing GNU time for per-process I/O counts" >&2
    apt-get install -y time >/dev/null || die "GNU time (/usr/bin/time) is missing"
fi

# Split the arguments: ours to keep, the ones we set ourselves to drop.
benchmarks="fillrandom,readrandom"
key_size=16
value_size=100
has_histogram=0
common=()
for arg in "$@"; do
    # gflags also accepts -name=value; normalize to --name=value.
    [[ "$arg" =~ ^-[a-zA-Z] ]] && arg="-$arg"
    case "$arg" in
        --benchmarks=*) benchmarks="${arg#*=}" ;;
        --db=* | --use_existing_db | --use_existing_db=* | --json=* | --engine=*) ;;
        *)
            case "$arg" in
                --key_size=*) key_size="${arg#*=}" ;;
                --value_size=*) value_size="${arg#*=}" ;;
                --histogram | --histogram=*) has_histogram=1 ;;
            esac
            common+=("$arg")
            ;;
    esac
done
# P99 comes from the Percentiles line, which only --histogram prints.
(( has_histogram )) || common+=("--histogram=1")
if ! printf '%s\n' "${common[@]}" | grep -q -- '^--compression_type='; then
    echo "compare_db_bench: note: no --compression_type; db_bench defaults to snappy," \
        "which cleave lacks (it uses lz4). Pass --compression_type=none for a fair run." >&2
fi

if [[ -n "${CLEAVE_BENCH:-}" ]]; then
    cleave_bench="$CLEAVE_BENCH"
else
    (cd "$root" && cargo build --release -q -p cleave-bench) || die "building cleave-bench failed"
    cleave_bench="${CARGO_TARGET_DIR:-$root/target}/release/cleave-bench"
fi
[[ -x "$cleave_bench" ]] || die "cleave-bench binary not found at $cleave_bench"

work="${COMPARE_DIR:-$(mktemp -d /tmp/compare_db_bench.XXXXXX)}"
mkdir -p "$work"
rm -rf "$work/rocksdb-db" "$work/cleave-db"
echo "compare_db_bench: databases and logs in $work"
echo "compare_db_bench: common flags: ${common[*]}"

is_fill() { [[ "$1" == fill* ]]; }
is_write() { [[ "$1" == fill* || "$1" == overwrite ]]; }

# Runs one benchmark with one tool; leaves <tool>-<bench>.{out,err,time}.
run_one() {
    local tool="$1" bench="$2" binary dir existing extra=()
    dir="$work/$tool-db"
    if [[ "$tool" == rocksdb ]]; then binary="$db_bench"; else binary="$cleave_bench"; fi
    [[ "$tool" == cleave ]] && extra=("--json=$work/cleave-$bench.json")
    if is_fill "$bench" || [[ ! -d "$dir" ]]; then
        rm -rf "$dir"
        existing=0
    else
        existing=1
    fi
    # The page cache holds the other tool's dirty pages otherwise, and their
    # writeback would slow this run down.
    sync
    /usr/bin/time -f "%O %U %S %M %e" -o "$work/$tool-$bench.time" \
        "$binary" --benchmarks="$bench" --db="$dir" --use_existing_db="$existing" \
        "${common[@]}" "${extra[@]}" >"$work/$tool-$bench.out" 2>"$work/$tool-$bench.err"
    local status=$?
    echo "$status" >"$work/$tool-$bench.status"
    if (( status != 0 )); then
        echo "compare_db_bench: $tool $bench failed (exit $status); last lines of its stderr:" >&2
        tail -n 5 "$work/$tool-$bench.err" >&2
    fi
    du -sb "$dir" 2>/dev/null | cut -f1 >"$work/$tool-$bench.du" || true
    return 0
}

# Prints "ops_per_sec p99_us ops result_line" from a db_bench-format log.
parse_result() {
    local bench="$1" file="$2"
    awk -v bench="$bench" '
        $1 == bench && $2 == ":" && $4 == "micros/op" {
            ops_s = $5; ops = $9; line = $0; in_result = 1; next
        }
        in_result && /^Percentiles:/ {
            for (i = 1; i < NF; i++) if ($i == "P99:") p99 = $(i + 1)
            in_result = 0
        }
        END {
            if (ops_s == "") { print "n/a n/a n/a -"; exit }
            if (p99 == "") p99 = "n/a"
            print ops_s, p99, ops, line
        }' "$file" 2>/dev/null || echo "n/a n/a n/a -"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {
    if (a ~ /^[0-9.eE+-]+$/ && b ~ /^[0-9.eE+-]+$/ && b + 0 != 0) printf "%.2f", a / b
    else printf "n/a" }'; }

report() {
    local bench="$1" tool time_fields oublock user_s sys_s rss_kib
    declare -A ops_s p99 ops line device cpu rss disk wamp
    for tool in rocksdb cleave; do
        if [[ "$(cat "$work/$tool-$bench.status" 2>/dev/null)" != 0 ]]; then
            # A failed run's costs describe the failure, not the benchmark.
            ops_s[$tool]=n/a; p99[$tool]=n/a; ops[$tool]=n/a; line[$tool]="(failed)"
            device[$tool]=n/a; cpu[$tool]=n/a; rss[$tool]=n/a; disk[$tool]=n/a; wamp[$tool]=n/a
            continue
        fi
        read -r ops_s[$tool] p99[$tool] ops[$tool] line[$tool] \
            < <(parse_result "$bench" "$work/$tool-$bench.out")
        time_fields="$(tail -n 1 "$work/$tool-$bench.time" 2>/dev/null)"
        read -r oublock user_s sys_s rss_kib _ <<<"${time_fields:-n/a n/a n/a n/a}"
        if [[ "$oublock" =~ ^[0-9]+$ ]]; then
            device[$tool]=$((oublock * 512))
            cpu[$tool]="$(awk -v u="$user_s" -v s="$sys_s" 'BEGIN { printf "%.2f", u + s }')"
            rss[$tool]=$((rss_kib * 1024))
        else
            device[$tool]=n/a; cpu[$tool]=n/a; rss[$tool]=n/a
        fi
        disk[$tool]="$(cat "$work/$tool-$bench.du" 2>/dev/null)"
        [[ -n "${disk[$tool]}" ]] || disk[$tool]=n/a
        wamp[$tool]=n/a
        if is_write "$bench" && [[ "${ops[$tool]}" =~ ^[0-9]+$ && "${device[$tool]}" != n/a ]]; then
            wamp[$tool]="$(ratio "${device[$tool]}" $((ops[$tool] * (key_size + value_size))))"
        fi
    done
    echo
    echo "== $bench"
    printf '%-26s %16s %16s %15s\n' metric rocksdb cleave cleave/rocksdb
    row() { printf '%-26s %16s %16s %15s\n' "$1" "$2" "$3" "$(ratio "$3" "$2")"; }
    row "ops/s" "${ops_s[rocksdb]}" "${ops_s[cleave]}"
    row "P99 us" "${p99[rocksdb]}" "${p99[cleave]}"
    row "write amp (device/user)" "${wamp[rocksdb]}" "${wamp[cleave]}"
    row "device write bytes" "${device[rocksdb]}" "${device[cleave]}"
    row "disk bytes (du -sb)" "${disk[rocksdb]}" "${disk[cleave]}"
    row "CPU s (user+sys)" "${cpu[rocksdb]}" "${cpu[cleave]}"
    row "peak RSS bytes" "${rss[rocksdb]}" "${rss[cleave]}"
    echo "  rocksdb: ${line[rocksdb]}"
    echo "  cleave:  ${line[cleave]}"
}

IFS=',' read -r -a bench_list <<<"$benchmarks"
for bench in "${bench_list[@]}"; do
    [[ -n "$bench" ]] || continue
    echo "compare_db_bench: running $bench" >&2
    run_one rocksdb "$bench"
    run_one cleave "$bench"
    report "$bench"
done

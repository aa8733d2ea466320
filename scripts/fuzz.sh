#!/usr/bin/env bash
# The fuzz targets of fuzz/ (cargo-fuzz, libFuzzer; one per decoder of
# on-disk bytes), each for FUZZ_SECONDS (default 30) seconds, one after the
# other, from a copy of the checked-in corpus fuzz/corpus/<target>/ so that
# the run never grows the repository. Prints one line per target with its
# executions; fails if any target crashed, hung or ran out of memory (the
# input is then in fuzz/artifacts/<target>/, and the end of its log is
# printed).
#
#   scripts/fuzz.sh                      every target, 30 s each
#   FUZZ_SECONDS=300 scripts/fuzz.sh wal sstable
#   FUZZ_WORK_DIR=fuzz/corpus-local      keep the grown corpora there
#   FUZZ_CODEGEN_UNITS=1                 cargo-fuzz's default: about 20% more
#                                        executions per second, for long runs;
#                                        16, the default here, builds faster on
#                                        an idle machine (CI fuzzes 10 s each)
#
# Installs what is missing: the nightly toolchain (rustup) and cargo-fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-30}
if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for f in fuzz/fuzz_targets/*.rs; do
    name=${f##*/}
    targets+=("${name%.rs}")
  done
fi

if ! cargo +nightly --version >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi

build=(--codegen-units "${FUZZ_CODEGEN_UNITS:-16}")
cargo +nightly fuzz build "${build[@]}"

logs=$(mktemp -d)
if [ -n "${FUZZ_WORK_DIR:-}" ]; then
  work=$FUZZ_WORK_DIR
  trap 'rm -rf "$logs"' EXIT
else
  work=$(mktemp -d)
  trap 'rm -rf "$logs" "$work"' EXIT
fi

failed=()
summary=()
for t in "${targets[@]}"; do
  mkdir -p "$work/$t"
  cp fuzz/corpus/"$t"/* "$work/$t"/
  log=$logs/$t.log
  status=ok
  # -timeout: an input that runs for 10 s is a hang, hence a failure.
  if ! cargo +nightly fuzz run "${build[@]}" "$t" "$work/$t" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -dict="$PWD/fuzz/varints.dict" -print_final_stats=1 >"$log" 2>&1; then
    status=FAILED
    failed+=("$t")
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  corpus=$(find "$work/$t" -type f | wc -l)
  if [ "$status" != ok ]; then
    tail -n 60 "$log"
  fi
  summary+=("$(printf 'fuzz %-13s %4s s  %10s executions  %5s corpus inputs  %s' \
    "$t" "$seconds" "${execs:-?}" "$corpus" "$status")")
  echo "${summary[-1]}"
done

echo "fuzz summary:"
printf '%s\n' "${summary[@]}"

if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
  exit 1
fi

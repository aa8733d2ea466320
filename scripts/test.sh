#!/usr/bin/env bash
# The tests, all of them: installs what is missing (scripts/install-deps.sh),
# then runs the workspace's tests with every feature (so the RocksDB and
# BlobDB adapters of cleave-bench are built and tested against Debian's
# RocksDB), the Python package's, the crash test, the self-tests of the suite script's tables and
# plots and of the cleaning model, then every fuzz target for FUZZ_SECONDS
# (8 here) each (scripts/fuzz.sh, which installs the nightly toolchain and
# cargo-fuzz when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cargo test --workspace --release --all-features
# The Python package: its abi3 wheel built with maturin and tested under
# pytest (in a virtualenv under target/, from PyPI).
scripts/python-tests.sh
# cleave-server with clients nobody here wrote: redis-cli, redis-benchmark,
# redis-py.
scripts/redis-clients.sh
# The crash test: cleave-stress's writer killed with SIGKILL at random
# moments, every key and the whole database verified after each reopen,
# the WAL modes in turn (docs/reliability.md). CLEAVE_STRESS_SECONDS sets
# how long; hours find what minutes do not.
cargo run --release --all-features -p cleave-stress -- crash \
  --seconds "${CLEAVE_STRESS_SECONDS:-75}"
# The same for the log store: appends, trims and truncations of many logs
# from several threads, killed and checked (CLEAVE_LOGSTORE_STRESS_SECONDS).
cargo run --release --all-features -p cleave-stress -- logs-crash \
  --seconds "${CLEAVE_LOGSTORE_STRESS_SECONDS:-40}"
# The full-disk loop: fill a small ext4 file system of its own (a loop
# device, so root), check every acknowledged write while the database is
# read-only, free space, and wait for writes to resume by themselves
# (CLEAVE_FILL_STRESS_SECONDS).
if [ "$(id -u)" = 0 ]; then
  cargo run --release --all-features -p cleave-stress -- fill \
    --seconds "${CLEAVE_FILL_STRESS_SECONDS:-60}"
else
  echo "cleave-stress fill: skipped, it mounts a file system and needs root"
fi
# Debian's python3 has Debian's matplotlib, whatever python3 comes first on PATH.
python=/usr/bin/python3
[ -x "$python" ] || python=python3
"$python" scripts/suite.py --self-test
"$python" scripts/cleaning_model.py --self-test
# 10 s per target keeps the whole command within CI's 30 minutes on 2 cores.
FUZZ_SECONDS="${FUZZ_SECONDS:-8}" scripts/fuzz.sh

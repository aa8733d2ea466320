#!/usr/bin/env bash
# The tests, all of them: installs what is missing (scripts/install-deps.sh),
# then runs the workspace's tests with every feature (so the RocksDB and
# BlobDB adapters of cleave-bench are built and tested against Debian's
# RocksDB), then the self-test of the suite script's tables and plots, then
# every fuzz target for FUZZ_SECONDS (default 30) each (scripts/fuzz.sh,
# which installs the nightly toolchain and cargo-fuzz when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cargo test --workspace --release --all-features
# Debian's python3 has Debian's matplotlib, whatever python3 comes first on PATH.
python=/usr/bin/python3
[ -x "$python" ] || python=python3
"$python" scripts/suite.py --self-test
scripts/fuzz.sh

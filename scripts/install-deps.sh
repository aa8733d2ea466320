#!/usr/bin/env bash
# Installs what the tests and the engine comparisons need beyond Rust:
# RocksDB 7.8.3 from Debian (the library the `rocksdb` feature of
# cleave-bench links, and its db_bench), libclang for the crate's bindgen,
# a C compiler for zstd-sys, matplotlib for scripts/suite.py's plots, and
# numpy for scripts/cleaning_model.py, redis-tools (redis-cli,
# redis-benchmark) and redis-server for cleave-server's tests and
# comparisons, python3-venv for redis-py's virtualenv, and e2fsprogs and
# mount for the full-disk tests' loop-mounted ext4 images.
# Idempotent: installs only what is missing. Needs root (or sudo) for apt.
set -euo pipefail

packages=(build-essential librocksdb-dev libclang-dev rocksdb-tools python3 python3-matplotlib python3-numpy
  python3-venv redis-tools redis-server e2fsprogs mount)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q "${missing[@]}"

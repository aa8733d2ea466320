#!/usr/bin/env python3
"""The same workload against cleave and rocksdict (RocksDB's Python
binding), from Python: what a Python user of either would see.

Phases, each engine in a process of its own (so that peak RSS and CPU time
are its own):

  insert  N values (--value-size, 1 KiB by default) under random 16-byte
          keys, one put each (or write batches of --batch)
  read    every key once, in another random order, checking each value
  scan    one full scan, in key order, of every key and value

Then a flush, and the size of the database directory on disk (blocks
allocated, as `du` counts them). Reported per phase: operations per second,
wall seconds, and CPU seconds of the whole process (the engine's
background threads included); per engine: peak RSS.

Settings, the same for both wherever both have the knob:
  - no compression (cleave's sstables and values; RocksDB's
    set_compression_type(none)), so that neither wins by compressing;
  - writes not synced, the WAL on (both engines' default);
  - the same write buffer (--write-buffer-mb, 64 MiB), 2 write buffers,
    2 background jobs, 64 MiB target files and a 256 MiB level base
    (both engines' defaults), dynamic level sizes on (cleave's default;
    RocksDB's since 8.4, set explicitly);
  - the same block cache (--cache-mb, 32 MiB) and 10-bit bloom filters
    (RocksDB has no filter by default: set_bloom_filter(10, False), a full
    filter as cleave's);
  - raw mode in rocksdict (keys and values are bytes, not pickled);
  - direct I/O for reads and for flushes and compactions on both
    (--buffered-io turns it off), so that neither reads from the page
    cache what the other reads from the disk; no cache of separated
    values in cleave (RocksDB has no blob cache by default).
cleave separates values of at least 512 bytes into value files (its
default); plain RocksDB keeps them in its sstables. The engine
"rocksdict-blob" turns on RocksDB's BlobDB with the same 512-byte
threshold and blob GC, the comparable configuration of RocksDB.

rocksdict is not a dependency of the tests: install it into the same
virtualenv with --install (pip install rocksdict==0.3.29), or by hand.

  target/python-venv/bin/python bindings/python/bench/compare_rocksdict.py --install
  ... --n 1000000 --engines cleave,rocksdict,rocksdict-blob --dir /mnt/fast/bench
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROCKSDICT = "rocksdict==0.3.29"
ENGINES = ("cleave", "rocksdict", "rocksdict-blob")
# A multiplier that is a bijection on 64-bit integers (odd), spreading
# consecutive indices over the key space: random keys without a list.
KEY_MULTIPLIER = 0x9E3779B97F4A7C15
MASK64 = (1 << 64) - 1
# Bytes of each key: 16 hex digits.
KEY_BYTES = 16


def key(i):
    return b"%016x" % ((i * KEY_MULTIPLIER) & MASK64)


def read_order(n):
    """A permutation of range(n) other than the insert order."""
    step = 7919
    while n % step == 0:
        step += 2
    return ((i * step + 13) % n for i in range(n))


class Values:
    """Incompressible values cut from one random buffer, so that making
    them costs little beside the engine."""

    def __init__(self, size):
        self.size = size
        self.buffer = os.urandom(max(1 << 20, 4 * size))

    def __call__(self, i):
        offset = (i * 4099) % (len(self.buffer) - self.size)
        return self.buffer[offset : offset + self.size]


def open_cleave(path, args):
    import cleave

    db = cleave.open(
        path,
        write_buffer_size=args.write_buffer_mb << 20,
        max_write_buffer_number=2,
        max_background_jobs=2,
        target_file_size_base=64 << 20,
        max_bytes_for_level_base=256 << 20,
        level_compaction_dynamic_level_bytes=True,
        block_cache_capacity=args.cache_mb << 20,
        bloom_bits_per_key=10,
        compression="none",
        value_compression="none",
        cache_values=False,
        use_direct_reads=not args.buffered_io,
        use_direct_io_for_flush_and_compaction=not args.buffered_io,
        sync=False,
    )

    def write_batch(items):
        with db.write_batch() as wb:
            for k, v in items:
                wb[k] = v

    return db, write_batch, db.items, db.flush, db.close


def open_rocksdict(path, args, blob):
    from rocksdict import BlockBasedOptions, Cache, DBCompressionType, Options, Rdict, WriteBatch, WriteOptions

    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.set_write_buffer_size(args.write_buffer_mb << 20)
    opts.set_max_write_buffer_number(2)
    opts.set_max_background_jobs(2)
    opts.set_target_file_size_base(64 << 20)
    opts.set_max_bytes_for_level_base(256 << 20)
    opts.set_level_compaction_dynamic_level_bytes(True)
    opts.set_compression_type(DBCompressionType.none())
    opts.set_use_direct_reads(not args.buffered_io)
    opts.set_use_direct_io_for_flush_and_compaction(not args.buffered_io)
    table = BlockBasedOptions()
    table.set_block_cache(Cache(args.cache_mb << 20))
    table.set_bloom_filter(10, False)
    opts.set_block_based_table_factory(table)
    if blob:
        opts.set_enable_blob_files(True)
        opts.set_min_blob_size(512)
        opts.set_blob_compression_type(DBCompressionType.none())
        opts.set_enable_blob_gc(True)
    db = Rdict(path, opts)
    wo = WriteOptions()
    wo.sync = False
    db.set_write_options(wo)

    def write_batch(items):
        wb = WriteBatch(raw_mode=True)
        for k, v in items:
            wb.put(k, v)
        db.write(wb)

    return db, write_batch, db.items, db.flush, db.close


def disk_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


def device_io():
    """Bytes this process (its engine threads included) had the block
    device read and write: /proc/self/io's read_bytes and write_bytes."""
    fields = dict(line.split(": ") for line in open("/proc/self/io").read().splitlines())
    return int(fields["read_bytes"]), int(fields["write_bytes"])


def phase(results, name, ops, run):
    (read0, written0), cpu, wall = device_io(), time.process_time(), time.perf_counter()
    run()
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    read1, written1 = device_io()
    results[name] = {
        "ops": ops,
        "seconds": wall,
        "ops_per_second": ops / wall,
        "cpu_seconds": cpu,
        "device_read_bytes": read1 - read0,
        "device_write_bytes": written1 - written0,
    }


def worker(engine, path, args):
    if engine == "cleave":
        db, write_batch, items, flush, close = open_cleave(path, args)
    else:
        db, write_batch, items, flush, close = open_rocksdict(path, args, blob=engine == "rocksdict-blob")
    n, value = args.n, Values(args.value_size)
    results = {}

    def insert():
        if args.batch <= 1:
            for i in range(n):
                db[key(i)] = value(i)
            return
        for start in range(0, n, args.batch):
            write_batch([(key(i), value(i)) for i in range(start, min(start + args.batch, n))])

    def read():
        for i in read_order(n):
            if db[key(i)] != value(i):
                raise AssertionError(f"{engine}: wrong value for key {key(i)!r}")

    def scan():
        count = 0
        for _k, v in items():
            count += len(v) > 0
        if count != n:
            raise AssertionError(f"{engine}: the scan found {count} keys of {n}")

    phase(results, "insert", n, insert)
    phase(results, "read", n, read)
    phase(results, "scan", n, scan)
    written = device_io()[1]
    flush()
    # Write amplification: every byte the engine wrote from the first put
    # to the end of the final flush, over the keys and values put.
    written_total = results["insert"]["device_write_bytes"] + results["read"]["device_write_bytes"]
    written_total += results["scan"]["device_write_bytes"] + device_io()[1] - written
    results["write_amp"] = written_total / (n * (KEY_BYTES + args.value_size))
    results["disk_bytes_after_flush"] = disk_bytes(path)
    close()
    results["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(results))


def ensure_rocksdict(install):
    try:
        import rocksdict  # noqa: F401
    except ImportError:
        if not install:
            sys.exit(f"rocksdict is not installed: rerun with --install (pip install {ROCKSDICT})")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", ROCKSDICT], check=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000, help="keys (default 1,000,000)")
    parser.add_argument("--value-size", type=int, default=1024, help="bytes per value (default 1024)")
    parser.add_argument("--batch", type=int, default=1, help="puts per write batch (default 1: single puts)")
    parser.add_argument("--engines", default="cleave,rocksdict", help=f"comma-separated, of {', '.join(ENGINES)}")
    parser.add_argument("--write-buffer-mb", type=int, default=64)
    parser.add_argument("--cache-mb", type=int, default=32)
    parser.add_argument("--buffered-io", action="store_true", help="no direct I/O (both engines)")
    parser.add_argument("--dir", help="where the databases go (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the databases")
    parser.add_argument("--json", action="store_true", help="print the results as JSON too")
    parser.add_argument("--install", action="store_true", help=f"pip install {ROCKSDICT} if missing")
    parser.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        worker(args.worker, args.path, args)
        return
    engines = [e for e in args.engines.split(",") if e]
    for e in engines:
        if e not in ENGINES:
            parser.error(f"unknown engine {e!r}")
    if any(e.startswith("rocksdict") for e in engines):
        ensure_rocksdict(args.install)

    base = args.dir or tempfile.mkdtemp(prefix="cleave-vs-rocksdict-")
    os.makedirs(base, exist_ok=True)
    results = {}
    try:
        for engine in engines:
            path = os.path.join(base, engine)
            shutil.rmtree(path, ignore_errors=True)
            command = [sys.executable, os.path.abspath(__file__), "--worker", engine, "--path", path]
            for flag in ("n", "value_size", "batch", "write_buffer_mb", "cache_mb"):
                command += ["--" + flag.replace("_", "-"), str(getattr(args, flag))]
            if args.buffered_io:
                command.append("--buffered-io")
            out = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout
            results[engine] = json.loads(out.strip().splitlines()[-1])
            if not args.keep:
                shutil.rmtree(path, ignore_errors=True)
    finally:
        if not args.dir and not args.keep:
            shutil.rmtree(base, ignore_errors=True)

    print(f"{args.n:,} keys, {args.value_size}-byte values, batch {args.batch}")
    print(f"{'engine':<16}{'phase':<8}{'ops/s':>12}{'seconds':>10}{'CPU s':>10}{'read MiB':>10}{'written MiB':>13}")
    for engine, r in results.items():
        for name in ("insert", "read", "scan"):
            p = r[name]
            print(
                f"{engine:<16}{name:<8}{p['ops_per_second']:>12,.0f}{p['seconds']:>10.2f}{p['cpu_seconds']:>10.2f}"
                f"{p['device_read_bytes'] / 2**20:>10.1f}{p['device_write_bytes'] / 2**20:>13.1f}"
            )
    print(f"{'engine':<16}{'peak RSS MiB':>14}{'disk MiB':>12}{'write amp':>11}")
    for engine, r in results.items():
        print(
            f"{engine:<16}{r['peak_rss_bytes'] / 2**20:>14.1f}{r['disk_bytes_after_flush'] / 2**20:>12.1f}"
            f"{r['write_amp']:>11.2f}"
        )
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

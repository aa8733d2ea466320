#!/usr/bin/env python3
"""Run a named benchmark suite against cleave, RocksDB and BlobDB in one go.

One cleave-bench invocation runs every engine in turn on a fresh directory
with identical operations (see shared/BENCHMARKS.md for the workloads and the
fairness rules). This script derives all sizes from the live-data target,
runs the driver, tees its output, then prints a side-by-side table with
ratios to cleave and writes two PNG plots.

    scripts/suite.py fixed-8k                    # 2 GiB live, all engines
    scripts/suite.py fixed-1k --live-gib 0.5 --space-limit 1.5
    scripts/suite.py ycsb --ycsb-ops 500000 --engines cleave,rocksdb
    scripts/suite.py fixed-8k --dry-run          # print the commands only
    scripts/suite.py fixed-8k --results R.json   # re-render a finished run
    scripts/suite.py fixed-8k --overwrite-distribution uniform
    scripts/suite.py fixed-1k -- --threads=2     # raw driver flags after --
    scripts/suite.py fixed-8k --space-limits 1.1,1.25,1.5,2 --overwrite-distribution uniform
    scripts/suite.py --self-test                 # scripts/tests/test_suite.py

Suites: fixed-1k, fixed-8k, fixed-16k, mixed-8k, pareto-1k, ycsb, ttl-8k. The
key-value suites load every key once (filluniquerandom), then overwrite keys
drawn from --overwrite-distribution (zipfian, the default, or uniform); reads
and seeks are uniform. cleave separates values of at least --min_blob_size
(512) bytes into value files, as BlobDB does into blob files, with its
values out of the block cache (the driver's --use_blob_cache=false, as
db_bench runs BlobDB), so that every engine has the same cache budget;
--extra=--value_separation=false runs cleave without separation.
Output (--out, default bench-results/<suite>-<UTC time>): command.txt,
driver.log (stdout+stderr), results.json, table.md (with cleave's S_index,
and below it cleave's own space breakdown: sstables, value files, exposed
garbage; and what cleave's value-file GC read, wrote and reclaimed in each
phase, and where its time went), throughput_over_time.png,
throughput_vs_space.png. The database
goes to --db (default <out>/db); the driver wipes it between engines. The
binary is target/release/cleave-bench, built first unless --no-build or
CLEAVE_BENCH / --bench-bin name one.
--space-limits R1,R2,... runs the suite once per limit, every engine held to
R x its live data by the driver (--space_limit_ratio) and cleave's space
budget set to the same R (unless --space-budget says otherwise), each run in
<out>/limit-R/; then writes <out>/sweep.md and <out>/throughput_vs_limit.png:
update-phase throughput against the limit, per engine, each point filled if
the engine held the limit (the driver never had to stop its writers) and
hollow if not.
ttl-8k writes 8 KiB values with a time to live (--ttl-seconds, default 20)
at a steady rate (--write-rate-mib, default 24 MiB/s) for ten times the TTL
(fillrandom over as many keys as it writes), then reads (readrandom): cleave
with put_with_ttl, RocksDB and BlobDB opened through DBWithTTL. Its live data
is what has not expired, about rate x TTL (--live-gib does not apply); the
table adds each engine's space amplification over that once steady (from
twice the TTL on) and the value-file bytes its compactions read.
Plots need matplotlib (apt-get install python3-matplotlib).
"""

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import warnings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIB = 1 << 30
MIB = 1 << 20
KEY_SIZE = 24
# Flags every suite passes, as BENCHMARKS.md's fairness rules ask: no
# compression, the same memtables, files, background jobs and bloom bits,
# direct I/O for reads and for background writes, latency histograms.
COMMON_FLAGS = [
    f"--key_size={KEY_SIZE}", "--compression_type=none",
    "--write_buffer_size=67108864", "--max_write_buffer_number=2",
    "--target_file_size_base=67108864", "--max_bytes_for_level_base=268435456",
    "--max_background_jobs=2", "--level_compaction_dynamic_level_bytes=true",
    "--bloom_bits=10", "--use_direct_reads=true",
    "--use_direct_io_for_flush_and_compaction=true", "--histogram=1",
    "--seed=42", "--min_blob_size=512",
]
KV_PHASES = ("filluniquerandom,overwrite,waitforcompaction,readrandom,multireadrandom,"
             "seekrandom,readwhilewriting")
# Keys per MultiGet of multireadrandom: RocksDB's MultiGet works through keys
# 32 at a time (MultiGetContext::MAX_BATCH_SIZE).
MULTIREAD_BATCH = 32
YCSB_PHASES = "ycsb_load,ycsb_a,ycsb_b,ycsb_c,ycsb_f,ycsb_d,ycsb_e"
YCSB_RECORD = 1000  # 10 fields x 100 B
# suite -> (value distribution, mean value bytes, description for titles)
SUITES = {
    "fixed-1k": ("fixed", 1024, "1 KiB values"),
    "fixed-8k": ("fixed", 8192, "8 KiB values"),
    "fixed-16k": ("fixed", 16384, "16 KiB values"),
    "mixed-8k": ("mixed-8k", 8345, "Mixed-8K values, mean 8345 B"),
    "pareto-1k": ("pareto-1k", 1023, "Pareto-1K values, mean 1023 B"),
    "ycsb": (None, YCSB_RECORD, "YCSB, 10 x 100 B fields"),
    "ttl-8k": ("fixed", 8192, "8 KiB values with a TTL"),
}
TTL_PHASES = "fillrandom,readrandom"
# The TTL suite writes for this many TTLs, so that most of the run is in
# the steady state where values expire as fast as they are written.
TTL_RUN_TTLS = 10
OVERWRITE_DISTRIBUTIONS = ("zipfian", "uniform")
ENGINE_NAMES = {"cleave": "cleave", "rocksdb": "RocksDB", "blobdb": "BlobDB"}
ENGINE_COLORS = {"cleave": "tab:blue", "rocksdb": "tab:orange", "blobdb": "tab:green"}


def pretty(engine):
    return ENGINE_NAMES.get(engine, engine)


def is_write_bench(bench):
    return bench.startswith("fill") or bench == "overwrite" or bench.startswith("ycsb_")


# ---------------------------------------------------------------- commands

def suite_flags(args):
    """The driver flags of a suite, sizes derived from --live-gib."""
    live = int(args.live_gib * GIB)
    dist, mean_value, _ = SUITES[args.suite]
    num = live // (KEY_SIZE + mean_value)
    flags = list(COMMON_FLAGS)
    if args.write_buffer_mib is not None:
        flags = [f"--write_buffer_size={int(args.write_buffer_mib * MIB)}"
                 if f.startswith("--write_buffer_size=") else f for f in flags]
    if args.suite == "ttl-8k":
        rate = int(args.write_rate_mib * MIB)
        num = TTL_RUN_TTLS * args.ttl_seconds * rate // (KEY_SIZE + mean_value)
        live = rate * args.ttl_seconds
    flags.append(f"--cache_size={max(8 * MIB, live // 100)}")
    if args.suite == "ttl-8k":
        flags += [f"--benchmarks={args.phases or TTL_PHASES}", f"--num={num}",
                  f"--value_size={mean_value}", "--key_distribution=uniform",
                  "--read_key_distribution=uniform", f"--reads={args.reads}",
                  f"--ttl_seconds={args.ttl_seconds}",
                  f"--benchmark_write_rate_limit={rate}"]
    elif dist is None:  # ycsb: records of field_count x field_length bytes
        flags += [f"--benchmarks={args.phases or YCSB_PHASES}", f"--num={num}",
                  f"--ycsb_operation_count={args.ycsb_ops}",
                  "--ycsb_field_count=10", "--ycsb_field_length=100"]
    else:
        flags += [f"--benchmarks={args.phases or KV_PHASES}", f"--num={num}",
                  f"--writes={int(args.overwrite_factor * num)}",
                  f"--value_size={mean_value}", f"--value_size_distribution={dist}",
                  f"--key_distribution={args.overwrite_distribution}",
                  "--read_key_distribution=uniform",
                  "--zipf_theta=0.99", f"--reads={args.reads}",
                  f"--multiread_batch_size={MULTIREAD_BATCH}",
                  f"--seeks={args.seeks}", "--seek_nexts=100"]
    if args.space_limit is not None:
        flags.append(f"--space_limit_ratio={args.space_limit:g}")
    if args.space_budget is not None and dist is not None:
        live_bytes = num * (KEY_SIZE + mean_value)
        flags.append(f"--space_budget_bytes={int(args.space_budget * live_bytes)}")
    return flags + list(args.extra)


def bench_binary(args):
    explicit = args.bench_bin or os.environ.get("CLEAVE_BENCH")
    if explicit:
        return os.path.abspath(explicit), None
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    build = ["cargo", "build", "--release", "-p", "cleave-bench", "--features", "rocksdb"]
    return os.path.join(target, "release", "cleave-bench"), None if args.no_build else build


def driver_command(args, binary, db, json_path):
    return [binary, f"--engine={args.engines}", f"--db={db}",
            f"--json={json_path}"] + suite_flags(args)


def existing_ancestor(path):
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def check_db_dir(db, out):
    """The driver wipes --db: refuse obviously wrong places, and keep it on
    the repo's filesystem (the disk BENCHMARKS.md measured)."""
    db = os.path.realpath(db)
    repo = os.path.realpath(REPO)
    if db in ("/", repo, os.path.realpath(out)) or repo.startswith(db + os.sep):
        sys.exit(f"suite: refusing --db={db}: the driver wipes it")
    if os.stat(existing_ancestor(db)).st_dev != os.stat(repo).st_dev:
        sys.exit(f"suite: --db={db} is not on the repo's filesystem; "
                 "pass a --db under the repo's disk")


def drop_page_cache():
    """BENCHMARKS.md runs cold: sync and drop the page cache (root only)."""
    subprocess.run(["sync"], check=False)
    if os.geteuid() != 0:
        print("suite: not root, page cache not dropped", file=sys.stderr)
        return
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as e:
        print(f"suite: could not drop the page cache: {e}", file=sys.stderr)


def run_tee(cmd, log_path):
    """Runs cmd, copying its stdout and stderr to the terminal and log."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for line in iter(proc.stdout.readline, b""):
            sys.stdout.buffer.write(line)
            sys.stdout.flush()
            log.write(line)
        return proc.wait()


# ------------------------------------------------------------------- table

def group_records(records):
    """[(label, [record per engine])] in run order. The k-th run of a
    benchmark by each engine forms one group (label 'name#k' from k = 2)."""
    groups, runs = {}, {}
    for r in records:
        key = (r["engine"], r["benchmark"])
        runs[key] = runs.get(key, 0) + 1
        label = r["benchmark"] if runs[key] == 1 else f"{r['benchmark']}#{runs[key]}"
        groups.setdefault(label, []).append(r)
    return list(groups.items())


def space_amp(r):
    if r.get("space_amp") is not None:
        return r["space_amp"]
    if r.get("disk_bytes") is not None and r.get("live_bytes"):
        return r["disk_bytes"] / r["live_bytes"]
    return None


def ratio(a, b):
    return None if a is None or not b else a / b


def fmt(value, spec=",.0f", scale=1.0):
    return "–" if value is None else format(value / scale, spec)


def cleave_only(r, text):
    """A cell of a cleave-only column: blank for the other engines."""
    return text if r["engine"] == "cleave" else ""


def make_table(records, title):
    cols = ["benchmark", "engine", "ops/s", "MB/s", "ops/s vs cleave (engine / cleave)",
            "P50 µs", "P99 µs", "P99.9 µs", "write amp", "space amp", "S_index", "disk GiB",
            "live GiB", "throttled s", "peak RSS MiB", "CPU s", "device reads/op", "time s"]
    lines = [f"## {title}", "", "MB/s is 2^20 bytes/s, as db_bench's. Ratios > 1 mean "
             "faster than cleave. S_index (cleave only) is the space amplification of "
             "cleave's key tree: all levels' bytes, values they reference included, over "
             "the last level's.", "", "| " + " | ".join(cols) + " |",
             "|" + "|".join([" --- "] * 2 + [" ---: "] * (len(cols) - 2)) + "|"]
    summaries = []
    for label, group in group_records(records):
        base = next((r.get("ops_per_sec") for r in group if r["engine"] == "cleave"), None)
        for r in group:
            g = r.get
            lines.append("| " + " | ".join([
                label, pretty(r["engine"]), fmt(g("ops_per_sec")), fmt(g("mb_per_sec"), ".1f"),
                fmt(ratio(g("ops_per_sec"), base), ".2f"), fmt(g("p50_us"), ",.1f"),
                fmt(g("p99_us"), ",.1f"), fmt(g("p999_us"), ",.1f"), fmt(g("write_amp"), ".2f"),
                fmt(space_amp(r), ".2f"), cleave_only(r, fmt(g("s_index"), ".2f")),
                fmt(g("disk_bytes"), ".2f", GIB),
                fmt(g("live_bytes"), ".2f", GIB), fmt(g("throttled_s"), ".1f"),
                fmt(g("peak_rss_bytes"), ",.0f", MIB), fmt(g("cpu_s"), ".1f"),
                fmt(g("device_reads_per_op"), ".2f"), fmt(g("elapsed_s"), ".1f")]) + " |")
        summaries.append(summary_line(label, group, base))
    return "\n".join(lines + ttl_section(records) + space_section(records) + gc_section(records)
                     + ["", "Summary:", ""] + summaries) + "\n"


def ttl_section(records):
    """Each engine's space over unexpired live data once steady, and what
    its compactions read of value files, for runs with a TTL (records with
    steady_space_amp); none otherwise."""
    rows = [(label, r) for label, group in group_records(records) for r in group
            if r.get("steady_space_amp") is not None]
    if not rows:
        return []
    lines = ["", "With a TTL: disk over unexpired live data once a second from twice the "
             "TTL on, and the value-file bytes compactions read (cleave: for compaction "
             "filters, none to expire; BlobDB: blob reads, which DBWithTTL's filter needs "
             "to find each value's time, and blob GC's; RocksDB keeps values in its "
             "sstables, read by every compaction). Expired is what cleave's compactions "
             "dropped without reading it.", "",
             "| benchmark | engine | space amp median | space amp max | points "
             "| compaction read MiB | value-file bytes read MiB | expired MiB |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for label, r in rows:
        steady, counters = r["steady_space_amp"], r.get("engine_counters") or {}
        lines.append("| " + " | ".join([
            label, pretty(r["engine"]), fmt(steady.get("median"), ".2f"),
            fmt(steady.get("max"), ".2f"), fmt(steady.get("points")),
            fmt(counters.get("compaction_bytes_read"), ",.1f", MIB),
            fmt(counters.get("compaction_value_bytes_read"), ",.1f", MIB),
            fmt(counters.get("expired_value_bytes"), ",.1f", MIB)]) + " |")
    return lines


def space_section(records):
    """cleave's own account of its space after each benchmark (the driver's
    sstable_bytes, value_file_bytes, exposed_garbage_bytes), as table lines;
    none when no record has it."""
    rows = [(label, r) for label, group in group_records(records) for r in group
            if r["engine"] == "cleave" and r.get("value_file_bytes") is not None]
    if not rows:
        return []
    lines = ["", "cleave's space after each benchmark (Db::space_report; disk GiB above is "
             "every file in the directory, WAL included). Exposed garbage is value-file "
             "bytes no sstable references any more, which value-file GC would reclaim.", "",
             "| benchmark | sstables MiB | value files GiB | exposed garbage GiB "
             "| garbage % of value files | S_index |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for label, r in rows:
        g = r.get
        share = ratio(g("exposed_garbage_bytes"), g("value_file_bytes"))
        lines.append("| " + " | ".join([
            label, fmt(g("sstable_bytes"), ",.1f", MIB), fmt(g("value_file_bytes"), ".2f", GIB),
            fmt(g("exposed_garbage_bytes"), ".2f", GIB),
            fmt(None if share is None else 100 * share, ".1f"), fmt(g("s_index"), ".2f")]) + " |")
    return lines


def gc_section(records):
    """cleave's value-file GC during each benchmark (the driver's gc object),
    as table lines; none when no record has it."""
    rows = [(label, r["gc"]) for label, group in group_records(records) for r in group
            if r["engine"] == "cleave" and r.get("gc") is not None]
    if not rows:
        return []
    lines = ["", "cleave's value-file GC during each benchmark. Read is record indexes plus "
             "live records; reclaimed is the inputs' bytes minus the outputs'. Its writes are "
             "in write amp above, as every engine's own I/O is; RocksDB's and BlobDB's blob "
             "GC runs inside their compactions.", "",
             "| benchmark | GC jobs | files in | files out | read MiB | written MiB "
             "| reclaimed MiB | bitmaps ms | index ms | values ms | write ms | commit ms "
             "| throttled ms |",
             "| --- |" + " ---: |" * 12]
    for label, gc in rows:
        g = gc.get
        read = (None if g("index_bytes_read") is None or g("value_bytes_read") is None
                else g("index_bytes_read") + g("value_bytes_read"))
        lines.append("| " + " | ".join(
            [label, fmt(g("jobs")), fmt(g("files_in")), fmt(g("files_out")),
             fmt(read, ",.1f", MIB), fmt(g("bytes_written"), ",.1f", MIB),
             fmt(g("bytes_reclaimed"), ",.1f", MIB)]
            + [fmt(g(phase)) for phase in ("bitmap_ms", "index_ms", "value_read_ms",
                                           "write_ms", "commit_ms", "throttle_ms")]) + " |")
    return lines


def summary_line(label, group, base):
    others = [r for r in group if r["engine"] != "cleave"]
    if label.startswith("waitforcompaction"):  # no ops: compare time and space
        return f"- {label}: " + ", ".join(
            f"{pretty(r['engine'])} {fmt(r.get('elapsed_s'), '.1f')} s, space amp "
            f"{fmt(space_amp(r), '.2f')}" for r in group)
    if base is None or not others:
        return f"- {label}: " + ("no cleave result" if base is None else "cleave only")
    parts = [f"{fmt(ratio(base, r.get('ops_per_sec')), '.2f')}x {pretty(r['engine'])}"
             for r in others]
    return f"- {label}: cleave is " + " and ".join(parts) + " on ops/s"


# ------------------------------------------------------------------- plots

def import_pyplot():
    """matplotlib's pyplot with the Agg backend, installing Debian's package
    when root. Returns None (after saying why) when it cannot."""
    def load():
        try:
            # Debian's matplotlib under a newer pyparsing (pyenv's python3)
            # warns about pyparsing's renamed methods; harmless.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import matplotlib
                matplotlib.use("Agg")
                import matplotlib.pyplot as plt
            return plt
        except ImportError:
            return None
    plt = load()
    # Debian's package also serves another python3 of its version (pyenv's).
    dist = "/usr/lib/python3/dist-packages"
    debian = os.path.basename(os.path.realpath("/usr/bin/python3"))
    if plt is None and debian == "python%d.%d" % sys.version_info[:2] and dist not in sys.path:
        sys.path.append(dist)
        plt = load()
    if plt is None and os.geteuid() == 0:
        print("suite: installing python3-matplotlib", file=sys.stderr)
        subprocess.run(["apt-get", "install", "-y", "-q", "python3-matplotlib"],
                       stdout=subprocess.DEVNULL, check=False)
        plt = load()
    if plt is None:
        print("suite: matplotlib is missing, so no plots; install it with `apt-get "
              "install python3-matplotlib` or `pip install matplotlib`", file=sys.stderr)
    return plt


def engine_style(engine, index):
    return ENGINE_COLORS.get(engine, f"C{index + 3}")


def none_div(value, by=1.0):
    """value / by, with NaN (a gap in a plotted line) for a missing value."""
    return float("nan") if value is None else value / by


def legend_outside(ax, handles=None):
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def plot_over_time(plt, records, title, path, space_limit):
    """Per write phase, one row: its rate, and disk vs live GiB, over time."""
    from matplotlib.lines import Line2D
    groups = [(label, g) for label, g in group_records(records)
              if is_write_bench(g[0]["benchmark"])]
    if not groups:
        return False
    fig, axes = plt.subplots(len(groups), 2, figsize=(15, 3.4 * len(groups) + 0.8),
                             squeeze=False, constrained_layout=True)
    fig.suptitle(f"{title}: throughput and disk use over time", fontsize=14)
    for row, (label, group) in enumerate(groups):
        rate_ax, disk_ax = axes[row]
        # YCSB phases are mostly reads, so their rate is ops/s; the rest MiB/s.
        key, unit = ("ops_per_sec", "ops/s") if label.startswith("ycsb_") else ("mb_per_sec", "MiB/s")
        handles = []
        for i, r in enumerate(group):
            series = r.get("series") or []
            color, name = engine_style(r["engine"], i), pretty(r["engine"])
            t = [none_div(s.get("t_s")) for s in series]
            rate_ax.plot(t, [none_div(s.get(key)) for s in series], color=color, label=name, lw=1.3)
            live = [none_div(s.get("live_bytes"), GIB) for s in series]
            disk_ax.plot(t, [none_div(s.get("disk_bytes"), GIB) for s in series], color=color, lw=1.5)
            disk_ax.plot(t, live, color=color, ls="--", lw=1)
            if space_limit:
                disk_ax.plot(t, [v * space_limit for v in live], color=color, ls=":", lw=1)
            handles.append(Line2D([], [], color=color, label=name))
        handles.append(Line2D([], [], color="gray", label="disk (files' sizes)"))
        handles.append(Line2D([], [], color="gray", ls="--", label="live data"))
        if space_limit:
            handles.append(Line2D([], [], color="gray", ls=":", label=f"space limit ({space_limit:g} x live)"))
        rate_ax.set(title=f"{label}: throughput", xlabel="time since phase start (s)", ylabel=unit)
        disk_ax.set(title=f"{label}: disk use vs live data",
                    xlabel="time since phase start (s)", ylabel="GiB")
        for ax in (rate_ax, disk_ax):
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
        legend_outside(rate_ax)
        legend_outside(disk_ax, handles)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_vs_space(plt, records, title, path, space_limit):
    """One point per engine: update-phase throughput vs space amplification
    after it, and (hollow) after waitforcompaction settled the database."""
    from matplotlib.lines import Line2D
    groups = dict(group_records(records))
    update = "overwrite" if "overwrite" in groups else "ycsb_a" if "ycsb_a" in groups else None
    if update is None:
        return False
    key, unit = ("mb_per_sec", "MiB/s") if update == "overwrite" else ("ops_per_sec", "ops/s")
    settled = {r["engine"]: space_amp(r) for r in groups.get("waitforcompaction", [])}
    fig, ax = plt.subplots(figsize=(9.5, 5.5), constrained_layout=True)
    handles, xs = [], [1.0]
    for i, r in enumerate(groups[update]):
        x, y = space_amp(r), r.get(key)
        if x is None or y is None:
            continue
        color, name = engine_style(r["engine"], i), pretty(r["engine"])
        ax.scatter([x], [y], s=90, color=color, zorder=3)
        ax.annotate(name, (x, y), xytext=(7, 7), textcoords="offset points", fontsize=11, color=color)
        xs.append(x)
        if settled.get(r["engine"]) is not None:
            xs.append(settled[r["engine"]])
            ax.scatter([xs[-1]], [y], s=90, facecolors="none", edgecolors=color, zorder=3)
            ax.plot([x, xs[-1]], [y, y], color=color, lw=0.8, ls=":")
        handles.append(Line2D([], [], color=color, marker="o", ls="", label=name))
    handles.append(Line2D([], [], color="gray", marker="o", ls="", label=f"right after {update}"))
    if settled:
        handles.append(Line2D([], [], color="gray", marker="o", ls="", markerfacecolor="none",
                              label="after waitforcompaction"))
    if space_limit:
        ax.axvline(space_limit, color="red", ls="--", lw=1.2)
        handles.append(Line2D([], [], color="red", ls="--", label=f"space limit {space_limit:g}"))
        xs.append(space_limit)
    ax.set(title=f"{title}:\n{update} throughput vs space amplification",
           xlabel="space amplification (disk bytes / live bytes)", ylabel=f"{update} {unit}")
    ax.set_xlim(min(xs) - 0.05, max(xs) + 0.15)
    return finish_plot(plt, fig, ax, handles, path)


def finish_plot(plt, fig, ax, handles, path):
    """Room above the highest point, a grid, the legend; saves and closes."""
    ax.set_ylim(bottom=0, top=ax.get_ylim()[1] * 1.1)
    ax.grid(alpha=0.3)
    legend_outside(ax, handles)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def update_phase(groups):
    """The phase whose throughput a sweep compares: overwrite, or YCSB-A."""
    return "overwrite" if "overwrite" in groups else "ycsb_a" if "ycsb_a" in groups else None


def peak_space_amp(r):
    """The highest disk / live bytes of a record's per-second series."""
    amps = [p["disk_bytes"] / p["live_bytes"] for p in r.get("series") or []
            if p.get("disk_bytes") and p.get("live_bytes")]
    return max(amps) if amps else None


def held_limit(r):
    """Whether an engine kept within the driver's space limit on its own:
    the driver never had to stop its writers."""
    return not r.get("throttled_s") and not r.get("space_limit_gave_up")


def sweep_rows(sweep):
    """(limit, engine, update record) for each limit and engine, in order."""
    rows = []
    for limit, records in sorted(sweep.items()):
        groups = dict(group_records(records))
        phase = update_phase(groups)
        for r in groups.get(phase, []) if phase else []:
            rows.append((limit, r["engine"], r))
    return rows


def sweep_table(sweep, title):
    """Markdown: per limit, each engine's update throughput, its ratio to
    cleave's, whether it held the limit, and its peak space amplification."""
    lines = [f"## {title}: update throughput under a space limit", "",
             "| limit | engine | ops/s | MiB/s | x cleave | held the limit | throttled s | "
             "peak space amp | P99.9 us | write amp |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    rows = sweep_rows(sweep)
    cleave = {limit: r for limit, engine, r in rows if engine == "cleave"}
    for limit, engine, r in rows:
        base = cleave.get(limit)
        x = ratio(r.get("ops_per_sec"), base.get("ops_per_sec")) if base else None
        lines.append(
            f"| {limit:g} | {pretty(engine)} | {fmt(r.get('ops_per_sec'))} | "
            f"{fmt(r.get('mb_per_sec'), ',.1f')} | {fmt(x, '.2f')} | "
            f"{'yes' if held_limit(r) else 'no'} | {fmt(r.get('throttled_s'), ',.1f')} | "
            f"{fmt(peak_space_amp(r), '.2f')} | {fmt(r.get('p999_us'), ',.0f')} | "
            f"{fmt(r.get('write_amp'), '.2f')} |")
    return "\n".join(lines) + "\n"


def plot_vs_limit(plt, sweep, title, path):
    """Update throughput against the space limit, a line per engine; a
    filled point where the engine held the limit, hollow where the driver
    had to stop its writers."""
    from matplotlib.lines import Line2D
    rows = sweep_rows(sweep)
    if not rows:
        return False
    phase = next(r["benchmark"] for _, _, r in rows)
    key, unit = ("mb_per_sec", "MiB/s") if phase == "overwrite" else ("ops_per_sec", "ops/s")
    fig, ax = plt.subplots(figsize=(9.5, 5.5), constrained_layout=True)
    handles = []
    engines = list(dict.fromkeys(engine for _, engine, _ in rows))
    for i, engine in enumerate(engines):
        color = engine_style(engine, i)
        points = [(limit, r.get(key), held_limit(r)) for limit, e, r in rows
                  if e == engine and r.get(key) is not None]
        ax.plot([p[0] for p in points], [p[1] for p in points], color=color, lw=1.5)
        for x, y, held in points:
            ax.scatter([x], [y], s=80, zorder=3, color=color if held else "white",
                       edgecolors=color, linewidths=1.5)
        handles.append(Line2D([], [], color=color, marker="o", label=pretty(engine)))
    handles.append(Line2D([], [], color="gray", marker="o", ls="", label="held the limit"))
    handles.append(Line2D([], [], color="gray", marker="o", ls="", markerfacecolor="white",
                          label="throttled by the driver"))
    ax.set(title=f"{title}:\n{phase} throughput vs space limit",
           xlabel="space limit (x live data; cleave's budget the same)",
           ylabel=f"{phase} {unit}")
    ax.set_xticks(sorted(sweep))
    return finish_plot(plt, fig, ax, handles, path)


def render_sweep(sweep, out, title):
    """Writes sweep.md and throughput_vs_limit.png into out; prints the
    table. `sweep` maps each limit to its run's records."""
    table = sweep_table(sweep, title)
    print("\n" + table)
    with open(os.path.join(out, "sweep.md"), "w") as f:
        f.write(table)
    with open(os.path.join(out, "sweep.json"), "w") as f:
        json.dump({f"{limit:g}": records for limit, records in sweep.items()}, f)
    plt = import_pyplot()
    path = os.path.join(out, "throughput_vs_limit.png")
    if plt is None or not plot_vs_limit(plt, sweep, title, path):
        return []
    print(f"suite: wrote {path}")
    return [path]


def render(records, out, title, space_limit):
    """Writes table.md and the plots into out; prints the table."""
    table = make_table(records, title)
    print("\n" + table)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table)
    plt = import_pyplot()
    if plt is None:
        return []
    written = []
    for name, plot in (("throughput_over_time.png", plot_over_time),
                       ("throughput_vs_space.png", plot_vs_space)):
        if plot(plt, records, title, os.path.join(out, name), space_limit):
            written.append(os.path.join(out, name))
    for p in written:
        print(f"suite: wrote {p}")
    return written


def suite_title(suite, live_gib, overwrite_distribution=None):
    """The title of tables and plots; names the overwrite keys' distribution
    when given (the key-value suites)."""
    if suite == "ttl-8k":
        return f"{suite} ({SUITES[suite][2]})"
    overwrites = ""
    if overwrite_distribution and SUITES[suite][0] is not None:
        overwrites = f", {overwrite_distribution} overwrites"
    return f"{suite} ({SUITES[suite][2]}, {live_gib:g} GiB live{overwrites})"


# -------------------------------------------------------------------- main

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("suite", nargs="?", choices=sorted(SUITES))
    p.add_argument("--live-gib", type=float, default=2.0, help="live data target (GiB)")
    p.add_argument("--engines", default="cleave,rocksdb,blobdb")
    p.add_argument("--overwrite-factor", type=float, default=2.0,
                   help="overwrite writes = factor x num")
    p.add_argument("--overwrite-distribution", choices=OVERWRITE_DISTRIBUTIONS,
                   help="keys the overwrite phase picks (default zipfian): the driver's "
                   "--key_distribution, which the loads, writing every key once, and the "
                   "uniform reads ignore; not for ycsb, whose workloads fix their own")
    p.add_argument("--phases", metavar="LIST",
                   help="the driver's --benchmarks instead of the suite's phases "
                   "(a sweep needs only filluniquerandom,overwrite)")
    p.add_argument("--write-buffer-mib", type=float, metavar="MIB",
                   help="memtable size instead of the suites' 64 MiB")
    p.add_argument("--reads", type=int, default=200000)
    p.add_argument("--ttl-seconds", type=int, default=20, help="ttl-8k: the values' TTL")
    p.add_argument("--write-rate-mib", type=float, default=24.0,
                   help="ttl-8k: the steady write rate, MiB/s")
    p.add_argument("--seeks", type=int, default=20000)
    p.add_argument("--ycsb-ops", type=int, default=200000)
    p.add_argument("--space-limit", type=float, metavar="R", help="--space_limit_ratio")
    p.add_argument("--space-limits", metavar="R1,R2,...",
                   type=lambda text: [float(x) for x in text.split(",") if x],
                   help="one run per limit (cleave's budget equal to it), then the sweep's "
                   "table and plot")
    p.add_argument("--sweep-results", metavar="JSON", help="render an existing sweep.json")
    p.add_argument("--space-budget", type=float, metavar="R",
                   help="cleave's --space_budget_bytes as R x the suite's live bytes")
    p.add_argument("--extra", action="append", default=[], metavar="ARG",
                   help="raw driver flag, repeatable: --extra=--flag=value, or "
                   "put driver flags after a lone --")
    p.add_argument("--out", help="output dir (default bench-results/<suite>-<UTC time>)")
    p.add_argument("--db", help="database dir (default <out>/db; wiped by the driver)")
    p.add_argument("--bench-bin", help="cleave-bench binary (or env CLEAVE_BENCH)")
    p.add_argument("--no-build", action="store_true")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    p.add_argument("--results", metavar="JSON", help="render an existing results JSON")
    p.add_argument("--self-test", action="store_true", help="run scripts/tests/test_suite.py")
    argv = list(sys.argv[1:] if argv is None else argv)
    rest = []
    if "--" in argv:  # everything after a lone -- goes to the driver as is
        cut = argv.index("--")
        argv, rest = argv[:cut], argv[cut + 1:]
    args = p.parse_args(argv)
    args.extra += rest
    if not args.self_test and args.suite is None:
        p.error("a suite name is required")
    if args.suite == "ycsb" and args.overwrite_distribution is not None:
        p.error("--overwrite-distribution is for the key-value suites; ycsb has no overwrite phase")
    if args.overwrite_distribution is None:
        args.overwrite_distribution = "zipfian"
    if args.space_limits is not None and args.space_limit is not None:
        p.error("--space-limits and --space-limit do not go together")
    if args.space_limits is not None and (not args.space_limits
                                          or any(r < 1.0 for r in args.space_limits)):
        p.error("--space-limits needs limits of at least 1")
    return args


def run_one(args, argv, out, title):
    """Runs the driver once into out. Returns (status, records), or a
    status alone in the records' place (None) for a dry run."""
    db = os.path.abspath(args.db or os.path.join(out, "db"))
    json_path = os.path.join(out, "results.json")
    binary, build = bench_binary(args)
    cmd = driver_command(args, binary, db, json_path)
    if args.dry_run:
        if build:
            print(f"(cd {shlex.quote(REPO)} && {shlex.join(build)})")
        print(shlex.join(cmd))
        return 0, None
    check_db_dir(db, out)
    if build and subprocess.call(build, cwd=REPO) != 0:
        sys.exit("suite: building cleave-bench failed")
    if not os.access(binary, os.X_OK):
        sys.exit(f"suite: no cleave-bench binary at {binary}")
    os.makedirs(out, exist_ok=True)
    os.makedirs(os.path.dirname(db), exist_ok=True)
    with open(os.path.join(out, "command.txt"), "w") as f:
        f.write(f"# {shlex.join([sys.argv[0]] + (argv or sys.argv[1:]))}\n{shlex.join(cmd)}\n")
    print(f"suite: {title}; output in {out}\nsuite: {shlex.join(cmd)}", flush=True)
    drop_page_cache()
    status = run_tee(cmd, os.path.join(out, "driver.log"))
    if status != 0:
        print(f"suite: cleave-bench exited with status {status}", file=sys.stderr)
    try:
        with open(json_path) as f:
            records = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"suite: no results to report ({e}); see {out}/driver.log")
    render(records, out, title, args.space_limit)
    return status, records


def main(argv=None):
    args = parse_args(argv)
    if args.self_test:
        test = os.path.join(REPO, "scripts", "tests", "test_suite.py")
        return subprocess.call([sys.executable, test, "-v"])
    title = suite_title(args.suite, args.live_gib, args.overwrite_distribution)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = os.path.abspath(args.out or os.path.join(REPO, "bench-results", f"{args.suite}-{stamp}"))
    if args.sweep_results:
        with open(args.sweep_results) as f:
            sweep = {float(limit): records for limit, records in json.load(f).items()}
        os.makedirs(out, exist_ok=True)
        render_sweep(sweep, out, title)
        return 0
    if args.results:
        with open(args.results) as f:
            records = json.load(f)
        os.makedirs(out, exist_ok=True)
        render(records, out, title, args.space_limit)
        return 0
    if args.space_limits is None:
        return run_one(args, argv, out, title)[0]
    budget = args.space_budget
    sweep, worst = {}, 0
    for limit in args.space_limits:
        args.space_limit = limit
        args.space_budget = limit if budget is None else budget
        run_out = os.path.join(out, f"limit-{limit:g}")
        status, records = run_one(args, argv, run_out, f"{title}, space limit {limit:g}")
        worst = worst or status
        if records is not None:
            sweep[limit] = records
    if sweep:
        render_sweep(sweep, out, title)
    return worst


if __name__ == "__main__":
    sys.exit(main())

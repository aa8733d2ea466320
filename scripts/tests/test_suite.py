#!/usr/bin/env python3
"""Self-test of scripts/suite.py on fake cleave-bench results.

    python3 scripts/tests/test_suite.py -v     (or scripts/suite.py --self-test)

Set SUITE_TEST_OUT=DIR to keep the fake results, table and plots there.
"""

import contextlib
import importlib.util
import io
import json
import os
import random
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("suite", os.path.join(HERE, "..", "suite.py"))
suite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)

GIB = 1 << 30
MIB = 1 << 20
ENGINES = ["cleave", "rocksdb", "blobdb"]
# Overwrite ops/s per engine: the ratios the table must show are 0.50 and 0.80.
OVERWRITE_OPS = {"cleave": 30000.0, "rocksdb": 15000.0, "blobdb": 24000.0}


def fake_record(engine, bench, ops_per_sec, rng, live=2 * GIB):
    """One record as the driver's --json writes it, with a plausible series."""
    writes = suite.is_write_bench(bench)
    duration = {"cleave": 50, "rocksdb": 70, "blobdb": 60}[engine]
    amp = {"cleave": 1.2, "rocksdb": 1.8, "blobdb": 1.6}[engine]
    if bench == "waitforcompaction":  # settled
        amp = {"cleave": 1.15, "rocksdb": 1.1, "blobdb": 1.4}[engine]
    mb_s = ops_per_sec * 8216 / (1 << 20)
    series = []
    for t in range(1, duration + 1):
        grow = min(1.0, t / (duration * 0.3)) if bench.startswith("fill") else 1.0
        wobble = rng.uniform(0.7, 1.3) if engine != "cleave" else rng.uniform(0.95, 1.05)
        series.append({"t_s": float(t), "ops_per_sec": ops_per_sec * wobble,
                       "mb_per_sec": mb_s * wobble, "live_bytes": int(live * grow),
                       "disk_bytes": int(live * grow * (amp + 0.2 * rng.random()))})
    user = int(ops_per_sec * duration * 8216) if writes else 0
    device = int(user * amp * 1.5) if writes else None
    record = {
        "engine": engine, "benchmark": bench, "threads": 1,
        "ops": int(ops_per_sec * duration), "elapsed_s": float(duration),
        "ops_per_sec": ops_per_sec, "micros_per_op": 1e6 / ops_per_sec,
        "mb_per_sec": mb_s if writes else 0.0, "found": None if writes else 1000,
        "p50_us": 10.0, "p99_us": 300.0, "p999_us": 2500.0, "max_us": 9000.0,
        "user_bytes": user, "device_write_bytes": device,
        "write_amp": device / user if writes else None, "engine_write_amp": None,
        "disk_bytes": int(live * amp), "live_bytes": live, "space_amp": amp,
        "throttled_s": 0.0, "peak_rss_bytes": 300 << 20, "cpu_s": duration * 1.3,
        "engine_counters": None, "series": series,
    }
    if engine == "cleave":  # the driver's fields from cleave's space report
        record.update({"sstable_bytes": live // 50, "value_file_bytes": int(live * amp * 0.9),
                       "exposed_garbage_bytes": int(live * (amp - 1) * 0.5), "s_index": 1.11})
        # cleave's GC during the benchmark: only phases that make garbage run it.
        busy = writes or bench == "waitforcompaction"
        record["gc"] = {
            "jobs": 4 if busy else 0, "files_in": 6 if busy else 0,
            "files_out": 3 if busy else 0, "tables_read": 40 if busy else 0,
            "records_kept": 36000 if busy else 0, "records_dropped": 60000 if busy else 0,
            "index_bytes_read": (2 << 20) if busy else 0,
            "value_bytes_read": (300 << 20) if busy else 0,
            "bytes_written": (300 << 20) if busy else 0,
            "bytes_reclaimed": (500 << 20) if busy else 0,
            "bitmap_ms": 12.4 if busy else 0.0, "index_ms": 3.0 if busy else 0.0,
            "value_read_ms": 4500.6 if busy else 0.0, "write_ms": 2100.0 if busy else 0.0,
            "commit_ms": 8.0 if busy else 0.0, "throttle_ms": 250.0 if busy else 0.0,
        }
    return record


def fake_results(benchmarks=suite.KV_PHASES.split(",")):
    """3 engines x the fixed-8k benchmarks, engine-major as the driver runs."""
    rng = random.Random(42)
    base = {"filluniquerandom": 40000.0, "waitforcompaction": 1.0,
            "readrandom": 15000.0, "seekrandom": 1500.0}
    records = []
    for engine in ENGINES:
        for bench in benchmarks:
            if bench == "overwrite":
                ops = OVERWRITE_OPS[engine]
            else:
                ops = base.get(bench, 20000.0) * (1.0 if engine == "cleave" else 0.8)
            records.append(fake_record(engine, bench, ops, rng))
    return records


def args_for(*argv):
    return suite.parse_args(list(argv))


class CommandTest(unittest.TestCase):
    def test_fixed_8k_flags(self):
        flags = suite.suite_flags(args_for("fixed-8k", "--live-gib", "2"))
        num = 2 * GIB // (24 + 8192)
        for flag in [f"--num={num}", f"--writes={2 * num}", "--value_size=8192",
                     "--cache_size=21474836", "--key_distribution=zipfian",
                     "--read_key_distribution=uniform", "--reads=200000",
                     "--seeks=20000", "--seek_nexts=100", "--compression_type=none",
                     "--benchmarks=" + suite.KV_PHASES]:
            self.assertIn(flag, flags)
        self.assertFalse(any(f.startswith("--space_limit_ratio") for f in flags))

    def test_small_live_cache_floor_and_options(self):
        flags = suite.suite_flags(args_for("pareto-1k", "--live-gib", "0.25", "--space-limit",
                                           "1.5", "--extra=--threads=2"))
        self.assertIn(f"--cache_size={8 << 20}", flags)
        self.assertIn("--value_size_distribution=pareto-1k", flags)
        self.assertIn("--space_limit_ratio=1.5", flags)
        self.assertEqual(flags[-1], "--threads=2")
        flags = suite.suite_flags(args_for("fixed-1k", "--extra=--a=1", "--", "--b=2", "--c"))
        self.assertEqual(flags[-3:], ["--a=1", "--b=2", "--c"])

    def test_ttl_flags(self):
        flags = suite.suite_flags(args_for("ttl-8k", "--ttl-seconds", "30",
                                           "--write-rate-mib", "16"))
        num = 10 * 30 * 16 * MIB // (24 + 8192)
        for flag in [f"--num={num}", "--ttl_seconds=30",
                     f"--benchmark_write_rate_limit={16 * MIB}", "--value_size=8192",
                     "--key_distribution=uniform", "--benchmarks=" + suite.TTL_PHASES,
                     f"--cache_size={8 * MIB}"]:
            self.assertIn(flag, flags)
        self.assertFalse(any(f.startswith("--writes") for f in flags))
        self.assertEqual(suite.suite_title("ttl-8k", 2.0), "ttl-8k (8 KiB values with a TTL)")

    def test_ycsb_flags(self):
        flags = suite.suite_flags(args_for("ycsb", "--ycsb-ops", "1000"))
        self.assertIn(f"--num={2 * GIB // 1024}", flags)
        self.assertIn("--ycsb_operation_count=1000", flags)
        self.assertIn("--benchmarks=" + suite.YCSB_PHASES, flags)
        self.assertFalse(any(f.startswith("--writes") for f in flags))

    def test_overwrite_distribution(self):
        flags = suite.suite_flags(args_for("fixed-1k"))
        self.assertIn("--key_distribution=zipfian", flags)
        flags = suite.suite_flags(args_for("mixed-8k", "--overwrite-distribution", "uniform"))
        self.assertIn("--key_distribution=uniform", flags)
        self.assertNotIn("--key_distribution=zipfian", flags)
        # Reads stay uniform whatever the overwrites pick.
        self.assertIn("--read_key_distribution=uniform", flags)
        self.assertEqual(suite.suite_title("fixed-8k", 2.0, "uniform"),
                         "fixed-8k (8 KiB values, 2 GiB live, uniform overwrites)")
        self.assertEqual(suite.suite_title("ycsb", 1.0, "zipfian"),
                         "ycsb (YCSB, 10 x 100 B fields, 1 GiB live)")
        with contextlib.redirect_stderr(io.StringIO()):
            for bad in (["fixed-8k", "--overwrite-distribution", "latest"],
                        ["ycsb", "--overwrite-distribution", "uniform"]):
                with self.assertRaises(SystemExit, msg=bad):
                    args_for(*bad)
        self.assertEqual(args_for("ycsb").overwrite_distribution, "zipfian")

    def test_driver_command(self):
        args = args_for("fixed-1k", "--engines", "cleave,rocksdb", "--bench-bin", "/b")
        cmd = suite.driver_command(args, "/b", "/d", "/o/results.json")
        self.assertEqual(cmd[:4], ["/b", "--engine=cleave,rocksdb", "--db=/d",
                                   "--json=/o/results.json"])


def main_table(table):
    """The lines of the side-by-side table: from its header to a blank line."""
    lines = table.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| benchmark | engine |"))
    end = lines.index("", start)
    return lines[start:end]


class TableTest(unittest.TestCase):
    S_INDEX_COL = 10

    def rows(self, table, bench):
        cells = [[c.strip() for c in line.strip("|").split("|")]
                 for line in main_table(table) if line.startswith(f"| {bench} |")]
        return {c[1]: c for c in cells}

    def test_ratios_and_summary(self):
        rng = random.Random(1)
        records = [fake_record(e, "overwrite", ops, rng)
                   for e, ops in (("cleave", 100.0), ("rocksdb", 50.0), ("blobdb", 80.0))]
        table = suite.make_table(records, "fixed-8k test")
        rows = self.rows(table, "overwrite")
        ratio_col = 4
        self.assertEqual(rows["cleave"][ratio_col], "1.00")
        self.assertEqual(rows["RocksDB"][ratio_col], "0.50")
        self.assertEqual(rows["BlobDB"][ratio_col], "0.80")
        self.assertEqual(rows["RocksDB"][2], "50")
        self.assertIn("engine / cleave", table.splitlines()[4])
        self.assertIn("- overwrite: cleave is 2.00x RocksDB and 1.25x BlobDB on ops/s", table)

    def test_groups_in_run_order(self):
        table = suite.make_table(fake_results(), "t")
        benches = [line.split("|")[1].strip() for line in main_table(table)
                   if line.split("|")[1].strip() not in ("benchmark", "---")]
        self.assertEqual(benches, [b for b in suite.KV_PHASES.split(",") for _ in ENGINES])

    def test_nulls_and_repeats(self):
        records = fake_results(["overwrite", "overwrite"])
        for key in ("ops_per_sec", "p99_us", "write_amp", "space_amp", "disk_bytes",
                    "cpu_s", "peak_rss_bytes"):
            records[2][key] = None  # rocksdb's first overwrite
        table = suite.make_table(records, "t")
        self.assertIn("| overwrite#2 | RocksDB |", table)
        self.assertEqual(self.rows(table, "overwrite")["RocksDB"][4], "–")
        self.assertIn("- overwrite: cleave is –x RocksDB and 1.25x BlobDB on ops/s", table)


    def test_s_index_and_cleave_space(self):
        table = suite.make_table(fake_results(), "t")
        header = [c.strip() for c in main_table(table)[0].strip("|").split("|")]
        self.assertEqual(header[self.S_INDEX_COL], "S_index")
        rows = self.rows(table, "overwrite")
        self.assertEqual(rows["cleave"][self.S_INDEX_COL], "1.11")
        self.assertEqual(rows["RocksDB"][self.S_INDEX_COL], "")  # cleave only: blank
        self.assertEqual(rows["BlobDB"][self.S_INDEX_COL], "")
        # cleave's space section: one row per benchmark, after the main table.
        lines = table.splitlines()
        start = lines.index(next(line for line in lines if line.startswith(
            "| benchmark | sstables MiB | value files GiB | exposed garbage GiB")))
        section = [[c.strip() for c in line.strip("|").split("|")]
                   for line in lines[start + 2:start + 2 + len(suite.KV_PHASES.split(","))]]
        self.assertEqual([row[0] for row in section], suite.KV_PHASES.split(","))
        overwrite = section[1]
        # 2 GiB live, space amp 1.2: sstables 2 GiB / 50, value files 0.9 x 2.4 GiB,
        # garbage 0.5 x 0.4 GiB.
        self.assertEqual(overwrite[1:], ["41.0", "2.16", "0.20", "9.3", "1.11"])
        self.assertLess(start, lines.index("Summary:"))

    def test_ttl_section(self):
        records = fake_results()
        self.assertNotIn("With a TTL", suite.make_table(records, "t"))
        for r in records:
            if r["benchmark"] == "overwrite":
                r["steady_space_amp"] = {"from_s": 40.0, "points": 160, "median": 1.234,
                                         "max": 1.5}
                r["engine_counters"] = {"compaction_bytes_read": 3 * MIB,
                                        "compaction_value_bytes_read":
                                            None if r["engine"] == "rocksdb" else 2 * MIB,
                                        "expired_value_bytes":
                                            MIB if r["engine"] == "cleave" else None}
        table = suite.make_table(records, "t")
        lines = table.splitlines()
        start = lines.index(next(line for line in lines if line.startswith(
            "| benchmark | engine | space amp median")))
        rows = {row[1]: row for row in ([c.strip() for c in line.strip("|").split("|")]
                                        for line in lines[start + 2:start + 5])}
        self.assertEqual(rows["cleave"], ["overwrite", "cleave", "1.23", "1.50", "160", "3.0",
                                          "2.0", "1.0"])
        self.assertEqual(rows["RocksDB"][5:], ["3.0", "–", "–"])
        self.assertEqual(rows["BlobDB"][6:], ["2.0", "–"])

    def test_cleave_gc(self):
        table = suite.make_table(fake_results(), "t")
        lines = table.splitlines()
        start = lines.index(next(line for line in lines if line.startswith(
            "| benchmark | GC jobs | files in | files out | read MiB | written MiB")))
        header = [c.strip() for c in lines[start].strip("|").split("|")]
        self.assertEqual(header[-6:], ["bitmaps ms", "index ms", "values ms", "write ms",
                                       "commit ms", "throttled ms"])
        phases = suite.KV_PHASES.split(",")
        section = [[c.strip() for c in line.strip("|").split("|")]
                   for line in lines[start + 2:start + 2 + len(phases)]]
        # One row per benchmark, cleave's only.
        self.assertEqual([row[0] for row in section], phases)
        rows = dict((row[0], row[1:]) for row in section)
        # Read is the record indexes plus the live records: 2 + 300 MiB.
        self.assertEqual(rows["overwrite"], ["4", "6", "3", "302.0", "300.0", "500.0",
                                             "12", "3", "4,501", "2,100", "8", "250"])
        self.assertEqual(rows["readrandom"], ["0", "0", "0", "0.0", "0.0", "0.0",
                                              "0", "0", "0", "0", "0", "0"])
        # After cleave's space section, before the summary.
        space = lines.index(next(line for line in lines if line.startswith(
            "| benchmark | sstables MiB")))
        self.assertLess(space, start)
        self.assertLess(start, lines.index("Summary:"))
        # A record from a driver without some field shows a dash there.
        records = fake_results()
        del records[1]["gc"]["write_ms"]
        del records[1]["gc"]["index_bytes_read"]
        gc_row = next(line for line in suite.gc_section(records) if line.startswith(
            "| overwrite |"))
        self.assertEqual([c.strip() for c in gc_row.strip("|").split("|")][4], "–")
        self.assertEqual([c.strip() for c in gc_row.strip("|").split("|")][10], "–")

    def test_no_cleave_space_without_the_fields(self):
        records = fake_results()
        for r in records:
            for key in ("sstable_bytes", "value_file_bytes", "exposed_garbage_bytes", "s_index",
                        "gc"):
                r.pop(key, None)
        table = suite.make_table(records, "t")
        self.assertNotIn("sstables MiB", table)
        self.assertNotIn("GC jobs", table)
        # A cleave record without S_index (an older driver) shows a dash.
        self.assertEqual(self.rows(table, "overwrite")["cleave"][self.S_INDEX_COL], "–")


class RenderTest(unittest.TestCase):
    def test_pngs_written(self):
        if suite.import_pyplot() is None:
            self.skipTest("matplotlib is not available")
        keep = os.environ.get("SUITE_TEST_OUT")
        with tempfile.TemporaryDirectory() as tmp:
            out = keep or tmp
            os.makedirs(out, exist_ok=True)
            records = fake_results()
            records[0]["series"][5]["mb_per_sec"] = None  # a gap must not break plots
            with open(os.path.join(out, "results.json"), "w") as f:
                json.dump(records, f)
            with contextlib.redirect_stdout(io.StringIO()):
                written = suite.render(records, out, suite.suite_title("fixed-8k", 2.0), 1.5)
            self.assertEqual(sorted(os.path.basename(p) for p in written),
                             ["throughput_over_time.png", "throughput_vs_space.png"])
            for path in written:
                with open(path, "rb") as f:
                    self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
                self.assertGreater(os.path.getsize(path), 10000)
            self.assertTrue(os.path.exists(os.path.join(out, "table.md")))

    def test_ycsb_plots(self):
        if suite.import_pyplot() is None:
            self.skipTest("matplotlib is not available")
        with tempfile.TemporaryDirectory() as out:
            records = fake_results(suite.YCSB_PHASES.split(","))
            with contextlib.redirect_stdout(io.StringIO()):
                written = suite.render(records, out, suite.suite_title("ycsb", 2.0), None)
            self.assertEqual(len(written), 2)


FAKE_DRIVER = """#!/usr/bin/env python3
import json, sys
flags = dict(a[2:].split("=", 1) for a in sys.argv[1:] if "=" in a)
print("fake driver:", " ".join(sys.argv[1:]))
print("a line on stderr", file=sys.stderr)
json.dump(json.load(open(%r)), open(flags["json"], "w"))
"""


def run_fake_driver(test, tmp, results, *args):
    """suite.main with a driver that writes `results`; returns the output
    directory and the exit status."""
    if os.stat(tmp).st_dev != os.stat(suite.REPO).st_dev:
        test.skipTest("the temp dir is not on the repo's filesystem")
    with open(os.path.join(tmp, "fake.json"), "w") as f:
        json.dump(results, f)
    driver = os.path.join(tmp, "fake-bench")
    with open(driver, "w") as f:
        f.write(FAKE_DRIVER % os.path.join(tmp, "fake.json"))
    os.chmod(driver, 0o755)
    out = os.path.join(tmp, "out")
    suite.drop_page_cache = lambda: None
    with contextlib.redirect_stdout(io.TextIOWrapper(io.BytesIO())):
        status = suite.main(["fixed-8k", "--bench-bin", driver, "--out", out,
                             "--live-gib", "0.1", *args])
    return out, status


class EndToEndTest(unittest.TestCase):
    def test_run_with_fake_driver(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, status = run_fake_driver(self, tmp, fake_results())
            self.assertEqual(status, 0)
            for name in ("command.txt", "driver.log", "results.json", "table.md"):
                self.assertTrue(os.path.exists(os.path.join(out, name)), name)
            with open(os.path.join(out, "driver.log")) as f:
                log = f.read()
            self.assertIn("fake driver: --engine=cleave,rocksdb,blobdb --db=" + out + "/db", log)
            self.assertIn("a line on stderr", log)


def fake_sweep():
    """Two limits: at the tighter one RocksDB needed the driver to stop it."""
    sweep = {}
    for limit, scale in ((1.25, 1.0), (1.5, 1.5)):
        records = fake_results(["filluniquerandom", "overwrite"])
        for r in records:
            if r["benchmark"] == "overwrite":
                r["ops_per_sec"] *= scale
                r["mb_per_sec"] *= scale
                if r["engine"] == "rocksdb" and limit == 1.25:
                    r["throttled_s"] = 12.5
        sweep[limit] = records
    return sweep


class SweepTest(unittest.TestCase):
    def test_flags(self):
        args = args_for("fixed-8k", "--space-limits", "1.1,1.25", "--phases",
                        "filluniquerandom,overwrite", "--write-buffer-mib", "8")
        self.assertEqual(args.space_limits, [1.1, 1.25])
        flags = suite.suite_flags(args)
        self.assertIn("--benchmarks=filluniquerandom,overwrite", flags)
        self.assertIn("--write_buffer_size=8388608", flags)
        self.assertNotIn("--write_buffer_size=67108864", flags)
        with contextlib.redirect_stderr(io.StringIO()):
            for bad in (["--space-limits", "0.9"], ["--space-limits", "1.5", "--space-limit", "2"]):
                with self.assertRaises(SystemExit):
                    args_for("fixed-8k", *bad)

    def test_table_says_who_held_the_limit(self):
        table = suite.sweep_table(fake_sweep(), "t")
        rows = [line for line in table.splitlines() if line.startswith("| 1.")]
        self.assertEqual(len(rows), 6)
        rocks_tight = next(r for r in rows if r.startswith("| 1.25 | RocksDB"))
        self.assertIn("| no | 12.5 |", rocks_tight)
        self.assertIn("| 0.50 |", rocks_tight)
        cleave_loose = next(r for r in rows if r.startswith("| 1.5 | cleave"))
        self.assertIn("| 45,000 |", cleave_loose)
        self.assertIn("| yes | 0.0 |", cleave_loose)

    def test_plot(self):
        if suite.import_pyplot() is None:
            self.skipTest("matplotlib is not available")
        with tempfile.TemporaryDirectory() as out:
            with contextlib.redirect_stdout(io.StringIO()):
                written = suite.render_sweep(fake_sweep(), out, "t")
            self.assertEqual([os.path.basename(p) for p in written], ["throughput_vs_limit.png"])
            with open(written[0], "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            for name in ("sweep.md", "sweep.json"):
                self.assertTrue(os.path.exists(os.path.join(out, name)), name)

    def test_run_with_fake_driver(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, status = run_fake_driver(
                self, tmp, fake_results(["filluniquerandom", "overwrite"]),
                "--space-limits", "1.25,2", "--phases", "filluniquerandom,overwrite")
            self.assertEqual(status, 0)
            live = int(0.1 * GIB) // (24 + 8192) * (24 + 8192)
            for limit in ("1.25", "2"):
                with open(os.path.join(out, f"limit-{limit}", "driver.log")) as f:
                    log = f.read()
                self.assertIn(f"--space_limit_ratio={limit} ", log)
                self.assertIn(f"--space_budget_bytes={int(float(limit) * live)}", log)
            self.assertTrue(os.path.exists(os.path.join(out, "sweep.md")))


if __name__ == "__main__":
    unittest.main()

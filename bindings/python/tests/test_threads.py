"""Threads: every engine call releases the GIL, so a reader thread makes
progress while another thread is inside a long flush or compaction, and a
Db and its iterators are safe to share."""

import os
import random
import threading

import cleave


class Reader(threading.Thread):
    """Gets and short scans in a loop, counted, until stopped. With
    `watch` set to `(name, in_progress)`, also counts in `seen[name]` the
    reads after which `in_progress()` found a job of the database running."""

    def __init__(self, db, keys):
        super().__init__(daemon=True)
        self.db = db
        self.keys = keys
        self.reads = 0
        self.watch = None
        self.seen = {}
        self.stop = threading.Event()
        self.error = None

    def run(self):
        rng = random.Random(1)
        try:
            while not self.stop.is_set():
                key = rng.choice(self.keys)
                assert self.db[key] is not None
                assert next(self.db.keys(start=key)) == key
                self.reads += 1
                watch = self.watch
                if watch is not None and watch[1]():
                    self.seen[watch[0]] = self.seen.get(watch[0], 0) + 1
        except BaseException as e:  # reported by the test thread
            self.error = e


def fill(db, count, value_size, prefix=b""):
    keys = []
    value = os.urandom(value_size)
    for start in range(0, count, 1000):
        with db.write_batch() as wb:
            for i in range(start, min(start + 1000, count)):
                key = prefix + b"%08d" % i
                wb[key] = value
                keys.append(key)
    return keys


def test_reads_progress_during_a_long_flush_and_compaction(path):
    """Counted, not timed: the reader counts the reads it made while it
    could see the main thread's flush (an immutable memtable) or
    compaction (its output, on disk but in no level yet) in progress. The
    main thread is inside `flush()` or `compact()` all that time, so were
    the GIL held there, the reader could not run at all and would count
    none."""
    options = dict(
        # Inline values: the sstables hold all the bytes, so the flush and
        # the compaction have a lot to write.
        min_value_size=1 << 20,
        write_buffer_size=64 << 20,
        level0_file_num_compaction_trigger=100,
        level0_slowdown_writes_trigger=200,
        level0_stop_writes_trigger=300,
    )
    with cleave.open(path, **options) as db:
        keys = fill(db, 5000, 100, prefix=b"r")
        db.flush()
        reader = Reader(db, keys)
        reader.start()
        try:
            # About 30 MB in the memtable, then one flush of it.
            fill(db, 150_000, 200)
            assert db.property("cleave.num-immutable-mem-table") == "0"
            reader.watch = ("flush", lambda: db.property("cleave.num-immutable-mem-table") != "0")
            db.flush()
            # Then a compaction of both files into one level: its output
            # grows on disk ("other" bytes) until it is installed.
            assert db.space_report()["other_bytes"] < 1 << 20
            reader.watch = ("compaction", lambda: db.space_report()["other_bytes"] > 4 << 20)
            db.compact()
            reader.watch = None
        finally:
            reader.stop.set()
            reader.join()
        assert reader.error is None, reader.error
        stats = db.stats()
        assert stats["flushes"] >= 2
        assert stats["compaction_bytes_written"] > 30 << 20
        assert reader.seen.get("flush", 0) >= 10, reader.seen
        assert reader.seen.get("compaction", 0) >= 10, reader.seen


def test_a_writer_and_a_reader_both_progress(path):
    with cleave.open(path, write_buffer_size=1 << 20, min_value_size=256) as db:
        keys = fill(db, 2000, 500)
        reader = Reader(db, keys)
        written = []

        def write():
            rng = random.Random(2)
            for i in range(20_000):
                db[b"w%06d" % i] = rng.randbytes(300 + i % 400)
                written.append(i)
                if i % 5000 == 4999:
                    db.flush()

        writer = threading.Thread(target=write)
        reader.start()
        writer.start()
        writer.join()
        reads_while_writing = reader.reads
        reader.stop.set()
        reader.join()
        assert reader.error is None, reader.error
        assert len(written) == 20_000
        assert reads_while_writing > 0
        assert sum(1 for _ in db.keys(prefix=b"w")) == 20_000


def test_threads_share_a_db_and_an_iterator(db):
    keys = fill(db, 20_000, 50)
    shared = db.keys()
    seen = [[] for _ in range(4)]
    errors = []

    def work(n):
        try:
            rng = random.Random(n)
            for key in shared:
                seen[n].append(key)
                if rng.random() < 0.01:
                    db[b"extra%d-%d" % (n, len(seen[n]))] = b"x"
                    assert db.get(rng.choice(keys)) is not None
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    got = [k for part in seen for k in part]
    # Every key once: the iterator's view, without the later writes.
    assert sorted(got) == keys
    for part in seen:
        assert part == sorted(part)


def test_close_waits_for_calls_in_flight(path):
    db = cleave.open(path, write_buffer_size=64 << 20, min_value_size=1 << 20)
    fill(db, 100_000, 100)
    results = []

    def compact():
        try:
            db.compact()
            results.append("compacted")
        except cleave.ClosedError:
            results.append("closed")

    t = threading.Thread(target=compact)
    t.start()
    db.close()
    t.join()
    assert results in (["compacted"], ["closed"])
    with cleave.open(path) as again:
        assert sum(1 for _ in again) == 100_000

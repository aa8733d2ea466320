"""flush, compact, gc, the reports, verify, checkpoint, property; and
separated values through all of them."""

import os
import random

import cleave


def test_flush_and_compact(db):
    for i in range(500):
        db[b"%04d" % i] = b"v" * 50
    db.flush()
    stats = db.stats()
    assert stats["flushes"] >= 1
    assert len(stats["levels"]) == 7
    assert sum(level["files"] for level in stats["levels"]) >= 1
    db.compact()
    db.compact(start=b"0100", stop=b"0200")
    db.compact(start=b"0100")
    assert db[b"0499"] == b"v" * 50


def test_stats_has_every_field_as_plain_values(db):
    db[b"k"] = b"v"
    stats = db.stats()
    for name in ("user_writes", "wal_bytes_written", "gets", "block_cache_capacity", "space_usage_bytes"):
        assert isinstance(stats[name], int), name
    assert stats["user_writes"] == 1
    assert len(stats["gets_by_disk_reads"]) == 4
    assert isinstance(stats["gc"], dict) and "bytes_reclaimed" in stats["gc"]
    assert isinstance(stats["gc"]["write_time"], float)
    assert stats["last_gc"] is None
    assert stats["gc_rate_limit"] is None or isinstance(stats["gc_rate_limit"], int)
    assert {k["kind"] for k in stats["block_cache_kinds"]} >= {"data", "index", "filter"}
    assert set(stats["levels"][0]) == {"files", "bytes", "value_bytes", "target_bytes", "score"}


def test_space_report(db):
    for i in range(200):
        db[b"%04d" % i] = os.urandom(1000)
    db.flush()
    space = db.space_report()
    assert len(space["levels"]) == 7
    assert set(space["levels"][0]) == {"sstable_bytes", "value_bytes", "compensated_bytes"}
    assert space["on_disk_bytes"] > 0
    assert space["value_files"] >= 1
    assert space["referenced_value_bytes"] >= 200 * 1000
    assert isinstance(space["gc"], dict)


def test_verify_reports_a_healthy_database(db):
    for i in range(300):
        db[b"%04d" % i] = os.urandom(700)
    db.flush()
    report = db.verify()
    assert report["ok"] is True
    assert report["problems"] == []
    assert report["sstables"] >= 1
    assert report["value_handles"] == 300
    db.verify_checksums()


def test_checkpoint_opens_as_a_database_of_its_own(db, tmp_path):
    for i in range(100):
        db[b"%03d" % i] = b"v%d" % i
    copy = tmp_path / "copy"
    info = db.checkpoint(copy)
    assert set(info) == {"files_linked", "files_copied", "bytes_copied", "last_sequence"}
    assert info["last_sequence"] >= 100
    db[b"000"] = b"changed"
    with cleave.open(copy, create_if_missing=False) as c:
        assert c[b"000"] == b"v0"
        assert sum(1 for _ in c) == 100
    try:
        db.checkpoint(copy)
    except cleave.InvalidArgumentError as e:
        assert "not empty" in str(e)
    else:
        raise AssertionError("a checkpoint into a non-empty directory must fail")


def test_property(db):
    db[b"k"] = b"v"
    db.flush()
    assert "Level" in db.property("cleave.levelstats")
    assert db.property("rocksdb.num-files-at-level0") is not None
    assert db.property("cleave.no-such-property") is None
    assert int(db.property("cleave.total-sst-files-size")) > 0
    db.sync_wal()
    db.wait_for_compactions()


def test_separated_values_round_trip_through_flush_compact_and_gc(path):
    rng = random.Random(7)
    options = dict(
        min_value_size=64,
        write_buffer_size=128 << 10,
        value_file_size=64 << 10,
        enable_gc=False,
    )
    model = {}
    with cleave.open(path, **options) as db:
        for round_ in range(4):
            for i in range(300):
                key = b"key%04d" % rng.randrange(400)
                # Some below min_value_size (inline), most separated, some
                # through the value logs (big_value_threshold, 32 KiB).
                size = rng.choice([10, 100, 1000, 5000, 40_000])
                value = rng.randbytes(size)
                db[key] = value
                model[key] = value
            for key in rng.sample(sorted(model), 20):
                del db[key]
                del model[key]
            db.flush()
        stats = db.stats()
        assert stats["value_file_bytes_written"] > 0
        assert stats["value_log_records"] > 0
        db.compact()
        garbage = db.space_report()["exposed_garbage_bytes"]
        assert garbage > 0
        gc = db.gc(ratio=0.01)
        assert gc["jobs"] >= 1 and gc["files_in"] >= 1
        assert gc["bytes_reclaimed"] > 0
        assert db.stats()["last_gc"] is not None
        assert db.space_report()["exposed_garbage_bytes"] < garbage
        assert dict(db.items()) == model
        assert list(db.values(reverse=True)) == [model[k] for k in sorted(model, reverse=True)]
        for key, value in model.items():
            assert db[key] == value
        assert db.verify()["ok"]
    with cleave.open(path, **options) as db:
        assert dict(db.items()) == model

"""The exceptions: their classes, and the engine errors that raise them."""

import os
import struct

import pytest

import cleave

SUBCLASSES = [
    cleave.CorruptionError,
    cleave.IOError,
    cleave.InvalidArgumentError,
    cleave.LockedError,
    cleave.PoisonedError,
    cleave.NoSpaceError,
    cleave.SpaceBudgetExceededError,
    cleave.ReadOnlyError,
    cleave.MergeError,
    cleave.UnsupportedFormatError,
    cleave.ClosedError,
]


def test_hierarchy():
    assert issubclass(cleave.Error, Exception)
    for cls in SUBCLASSES:
        assert issubclass(cls, cleave.Error), cls
        assert cls.__module__ == "cleave._errors"
    assert issubclass(cleave.IOError, OSError)
    assert issubclass(cleave.InvalidArgumentError, ValueError)
    # A budget's refusal is a full disk of the database's own making.
    assert issubclass(cleave.SpaceBudgetExceededError, cleave.NoSpaceError)
    assert len(set(SUBCLASSES)) == len(SUBCLASSES)


def test_corrupted_sstable_raises_corruption_error_naming_the_file(path):
    with cleave.open(path) as db:
        for i in range(2000):
            db[b"key%05d" % i] = b"value %d " % i * 4
        db.flush()
    tables = sorted(p for p in os.listdir(path) if p.endswith(".sst"))
    assert tables, os.listdir(path)
    table = os.path.join(path, tables[0])
    with open(table, "r+b") as f:
        size = f.seek(0, os.SEEK_END)
        # Data blocks come first: flip bytes a third of the way in.
        f.seek(size // 3)
        chunk = f.read(64)
        f.seek(size // 3)
        f.write(bytes(b ^ 0xFF for b in chunk))
    with cleave.open(path) as db:
        with pytest.raises(cleave.CorruptionError) as info:
            for _ in db.items():
                pass
        assert tables[0] in str(info.value)
        assert info.value.path == table
        assert isinstance(info.value.offset, int)
        report = db.verify()
        assert not report["ok"]
        assert any(tables[0] in p for p in report["problems"])
        with pytest.raises(cleave.CorruptionError, match=tables[0]):
            db.verify_checksums()


def test_opening_a_locked_database_raises_locked_error(path):
    with cleave.open(path):
        with pytest.raises(cleave.LockedError) as info:
            cleave.open(path)
        assert info.value.path == str(path)
        assert "already open" in str(info.value)
    # Released on close.
    cleave.open(path).close()


def test_options_unknown_and_of_a_wrong_type(path):
    with pytest.raises(cleave.InvalidArgumentError, match="write_bufer_size"):
        cleave.open(path, write_bufer_size=1 << 20)
    with pytest.raises(ValueError, match="write_buffer_size"):
        cleave.open(path, write_buffer_size="big")
    with pytest.raises(cleave.InvalidArgumentError, match="enable_gc"):
        cleave.open(path, enable_gc=1)
    with pytest.raises(cleave.InvalidArgumentError, match="write_buffer_size"):
        cleave.open(path, write_buffer_size=True)
    with pytest.raises(cleave.InvalidArgumentError, match="write_buffer_size"):
        cleave.open(path, write_buffer_size=-1)
    with pytest.raises(cleave.InvalidArgumentError, match="gc_garbage_ratio"):
        cleave.open(path, gc_garbage_ratio="x")
    with pytest.raises(cleave.InvalidArgumentError, match="compression"):
        cleave.open(path, compression="snappy")
    with pytest.raises(cleave.InvalidArgumentError, match="merge_operator"):
        cleave.open(path, merge_operator="sum")
    with pytest.raises(cleave.InvalidArgumentError, match="sync"):
        cleave.open(path, sync="yes")
    # Values the engine refuses, named by the engine.
    with pytest.raises(cleave.InvalidArgumentError, match="write_buffer_size"):
        cleave.open(path, write_buffer_size=10)
    with pytest.raises(cleave.InvalidArgumentError, match="gc_garbage_ratio"):
        cleave.open(path, gc_garbage_ratio=1.5)
    assert not os.path.exists(os.path.join(path, "CURRENT"))


def test_every_listed_option_is_accepted_with_its_default(path):
    defaults = cleave.default_options()
    assert defaults["create_if_missing"] is True
    assert defaults["sync"] is False
    assert defaults["compression"] in ("none", "lz4", "zstd")
    with cleave.open(path, **defaults) as db:
        db[b"k"] = b"v"
    with cleave.open(
        path,
        compression="zstd",
        value_compression="lz4",
        merge_operator="max",
        prefix_extractor=4,
        range_merge_idle=0.5,
        gc_garbage_ratio=1,
        block_cache_capacity=1 << 20,
        paranoid_checks=True,
        enable_delta_separation=True,
        space_budget_bytes=1 << 30,
        max_write_buffer_number=3,
        min_value_size=100,
        value_file_size=1 << 20,
        enable_gc=False,
        error_if_exists=False,
    ) as db:
        assert db[b"k"] == b"v"


def test_create_if_missing_false_and_error_if_exists(path):
    with pytest.raises(cleave.InvalidArgumentError, match="does not exist"):
        cleave.open(path, create_if_missing=False)
    cleave.open(path).close()
    with pytest.raises(cleave.InvalidArgumentError, match="error_if_exists"):
        cleave.open(path, error_if_exists=True)


def test_io_error_is_an_os_error_with_errno(tmp_path):
    not_a_directory = tmp_path / "file"
    not_a_directory.write_bytes(b"x")
    with pytest.raises(OSError) as info:
        cleave.open(not_a_directory)
    assert isinstance(info.value, cleave.IOError)
    assert info.value.errno is not None
    assert info.value.path == str(not_a_directory)
    assert str(not_a_directory) in str(info.value)


def test_closed_database_raises_closed_error_everywhere(path):
    db = cleave.open(path)
    db[b"k"] = b"v"
    wb = db.write_batch()
    wb[b"x"] = b"y"
    db.close()
    db.close()
    assert db.closed
    calls = [
        lambda: db[b"k"],
        lambda: db.get(b"k"),
        lambda: db.put(b"k", b"v"),
        lambda: db.__setitem__(b"k", b"v"),
        lambda: db.__delitem__(b"k"),
        lambda: b"k" in db,
        lambda: len(db),
        lambda: bool(db),
        lambda: list(db),
        lambda: db.items(),
        lambda: db.keys(start=b"b", stop=b"a"),
        lambda: db.snapshot(),
        lambda: db.flush(),
        lambda: db.compact(),
        lambda: db.gc(),
        lambda: db.stats(),
        lambda: db.space_report(),
        lambda: db.verify(),
        lambda: db.property("cleave.stats"),
        lambda: db.checkpoint(str(path) + "-copy"),
        lambda: db.write(wb),
        lambda: db.sync_wal(),
    ]
    for call in calls:
        with pytest.raises(cleave.ClosedError):
            call()


def test_merge_errors(path):
    with cleave.open(path) as db:
        # No merge operator: the engine refuses the write.
        with pytest.raises(cleave.InvalidArgumentError, match="merge operator"):
            db.merge(b"k", b"x")
    with cleave.open(path, merge_operator="uint64add") as db:
        with pytest.raises(cleave.InvalidArgumentError, match="8-byte"):
            db.merge(b"k", b"abc")
        db[b"k"] = b"abc"
        db.merge(b"k", struct.pack("<Q", 1))
        with pytest.raises(cleave.MergeError, match="base value"):
            db[b"k"]


def test_space_budget_exceeded(path):
    with cleave.open(
        path, space_budget_bytes=1 << 20, space_budget_fail_writes=True, write_buffer_size=64 << 10
    ) as db:
        value = os.urandom(1024)
        with pytest.raises(cleave.SpaceBudgetExceededError) as info:
            for i in range(10_000):
                db[b"%06d" % i] = value
        assert info.value.path == str(path)
        assert "space budget" in str(info.value)
        written = i
    with cleave.open(path) as db:
        assert sum(1 for _ in db) == written


def test_read_only_open_beside_a_writer(path):
    """read_only=True takes no lock: it opens beside a Db that has the
    directory open, replays its WAL, and refuses every write."""
    with cleave.open(path) as writer:
        for i in range(500):
            writer[b"%05d" % i] = b"v%d" % i
        writer.flush()
        writer[b"only-in-the-wal"] = b"yes"
        assert writer.write_state == "read-write"
        writer.resume()
        with pytest.raises(cleave.LockedError):
            cleave.open(path)
        with cleave.open(path, read_only=True) as reader:
            assert reader[b"only-in-the-wal"] == b"yes"
            assert sum(1 for _ in reader) == 501
            assert reader.write_state == "read-only (opened read-only)"
            assert "opened read-only" in reader.stats()["write_state"]
            for write in (
                lambda: reader.put(b"k", b"v"),
                lambda: reader.delete(b"00001"),
                reader.flush,
                reader.resume,
            ):
                with pytest.raises(cleave.ReadOnlyError) as info:
                    write()
                assert info.value.path == str(path)


def test_read_only_open_of_no_database_creates_nothing(tmp_path):
    with pytest.raises(cleave.InvalidArgumentError):
        cleave.open(tmp_path / "none", read_only=True)
    assert not (tmp_path / "none").exists()

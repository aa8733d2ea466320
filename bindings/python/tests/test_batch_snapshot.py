"""Write batches (atomic, discarded on an exception) and snapshots
(isolated from later writes, released on close)."""

import struct

import pytest

import cleave


def test_batch_applies_everything_on_a_clean_exit(db):
    db[b"gone"] = b"x"
    with db.write_batch() as wb:
        wb[b"a"] = b"1"
        wb.put(b"b", bytearray(b"2"))
        del wb[b"gone"]
        wb.delete(b"never")
        assert len(wb) == 4
        # Nothing is visible before the block ends.
        assert b"a" not in db
    assert dict(db.items()) == {b"a": b"1", b"b": b"2"}
    assert len(wb) == 0


def test_an_exception_in_the_block_applies_nothing(db):
    db[b"keep"] = b"old"
    with pytest.raises(RuntimeError, match="boom"):
        with db.write_batch() as wb:
            wb[b"a"] = b"1"
            wb[b"keep"] = b"new"
            del wb[b"keep"]
            raise RuntimeError("boom")
    assert dict(db.items()) == {b"keep": b"old"}


def test_batch_without_with(db):
    wb = cleave.WriteBatch()
    wb[b"x"] = b"1"
    wb[b"y"] = b"2"
    wb.clear()
    wb[b"z"] = b"3"
    db.write(wb, sync=True)
    assert list(db.items()) == [(b"z", b"3")]
    assert len(wb) == 0
    with pytest.raises(TypeError):
        with cleave.WriteBatch():
            pass


def test_batch_refuses_str(db):
    wb = db.write_batch()
    with pytest.raises(TypeError):
        wb["k"] = b"v"
    with pytest.raises(TypeError):
        wb.merge(b"k", "v")


def test_a_failed_batch_applies_nothing(db):
    # No merge operator: the engine refuses the batch as a whole.
    with pytest.raises(cleave.InvalidArgumentError, match="merge"):
        with db.write_batch() as wb:
            wb[b"a"] = b"1"
            wb.merge(b"counter", b"x")
    assert b"a" not in db


def test_merge_in_batch_and_db(path):
    with cleave.open(path, merge_operator="uint64add") as db:
        one = struct.pack("<Q", 1)
        db.merge(b"n", one)
        with db.write_batch() as wb:
            wb.merge(b"n", one)
            wb.merge(b"n", one)
        assert struct.unpack("<Q", db[b"n"]) == (3,)
        db.flush()
        db.merge(b"n", struct.pack("<Q", 10))
        assert struct.unpack("<Q", db[b"n"]) == (13,)
    with cleave.open(path, merge_operator="uint64add") as db:
        assert struct.unpack("<Q", db[b"n"]) == (13,)


def test_snapshot_isolation(db):
    for i in range(100):
        db[b"%03d" % i] = b"before"
    with db.snapshot() as snap:
        seq = snap.sequence_number
        assert seq is not None
        for i in range(0, 100, 2):
            db[b"%03d" % i] = b"after"
        for i in range(1, 100, 4):
            del db[b"%03d" % i]
        db[b"new"] = b"after"
        db.flush()
        db.compact()
        assert snap[b"000"] == b"before"
        assert snap.get(b"001") == b"before"
        assert b"new" not in snap
        assert snap.get(b"new", b"d") == b"d"
        with pytest.raises(KeyError):
            snap[b"new"]
        assert list(snap.keys()) == [b"%03d" % i for i in range(100)]
        assert list(snap) == list(snap.keys())
        assert all(v == b"before" for v in snap.values(prefix=b"0"))
        assert list(snap.items(start=b"010", stop=b"013", reverse=True)) == [
            (b"012", b"before"),
            (b"011", b"before"),
            (b"010", b"before"),
        ]
        # The database itself moved on.
        assert db[b"000"] == b"after"
        assert b"001" not in db
    assert snap.sequence_number is None
    with pytest.raises(cleave.ClosedError):
        snap[b"000"]
    with pytest.raises(cleave.ClosedError):
        snap.keys()
    with pytest.raises(cleave.ClosedError):
        snap.keys(start=b"b", stop=b"a")
    snap.close()


def test_an_iterator_of_a_snapshot_outlives_it(db):
    db[b"a"] = b"1"
    snap = db.snapshot()
    it = snap.items()
    db[b"a"] = b"2"
    snap.close()
    assert list(it) == [(b"a", b"1")]


def test_snapshot_reads_fail_once_the_database_closes(path):
    db = cleave.open(path)
    db[b"a"] = b"1"
    snap = db.snapshot()
    db.close()
    with pytest.raises(cleave.ClosedError):
        snap.get(b"a")

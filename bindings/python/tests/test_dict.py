"""A Db as a dict of bytes: item access, the bytes-like arguments it takes
and the ones it refuses, len and bool, and the default write options."""

import array

import pytest

import cleave


def test_set_get_delete_contains(db):
    db[b"a"] = b"1"
    db.put(b"b", b"2")
    assert db[b"a"] == b"1"
    assert db.get(b"b") == b"2"
    assert b"a" in db and b"b" in db
    assert b"c" not in db
    del db[b"a"]
    db.delete(b"b")
    assert b"a" not in db
    assert db.get(b"b") is None


def test_missing_key_raises_key_error_with_the_key(db):
    with pytest.raises(KeyError) as info:
        db[b"absent"]
    assert info.value.args == (b"absent",)


def test_get_default(db):
    assert db.get(b"absent") is None
    assert db.get(b"absent", b"fallback") == b"fallback"
    sentinel = object()
    assert db.get(b"absent", sentinel) is sentinel
    db[b"k"] = b"v"
    assert db.get(b"k", b"fallback") == b"v"


def test_overwrite_and_empty_key_and_value(db):
    db[b"k"] = b"old"
    db[b"k"] = b"new"
    assert db[b"k"] == b"new"
    db[b""] = b""
    assert db[b""] == b""
    assert b"" in db


def test_delete_of_an_absent_key_is_silent(db):
    del db[b"never-written"]
    db.delete(b"never-written", sync=True)


@pytest.mark.parametrize(
    "make",
    [bytes, bytearray, memoryview, lambda b: array.array("B", b)],
    ids=["bytes", "bytearray", "memoryview", "array"],
)
def test_bytes_like_keys_and_values(db, make):
    db[make(b"key")] = make(b"value")
    assert db[make(b"key")] == b"value"
    assert isinstance(db[b"key"], bytes)
    assert make(b"key") in db
    assert db.get(make(b"key")) == b"value"
    assert list(db.keys(start=make(b"k"), stop=make(b"l"))) == [b"key"]
    del db[make(b"key")]
    assert b"key" not in db


def test_a_bytearray_changed_after_the_call_does_not_change_the_value(db):
    value = bytearray(b"before")
    db[b"k"] = value
    value[:] = b"after!"
    assert db[b"k"] == b"before"


@pytest.mark.parametrize("bad", ["text", 5, None, 1.5, [1, 2]])
def test_keys_that_are_not_bytes_raise_type_error(db, bad):
    with pytest.raises(TypeError):
        db[bad] = b"v"
    with pytest.raises(TypeError):
        db[b"k"] = bad
    with pytest.raises(TypeError):
        db.get(bad)
    with pytest.raises(TypeError):
        bad in db  # noqa: B015
    with pytest.raises(TypeError):
        del db[bad]


def test_str_is_refused_with_a_hint(db):
    with pytest.raises(TypeError, match="not str"):
        db["key"] = b"v"
    with pytest.raises(TypeError, match="not str"):
        db.keys(prefix="k")


def test_len_estimates_and_bool_is_exact(db):
    assert len(db) == 0
    assert not db
    for i in range(100):
        db[b"%03d" % i] = b"v"
    # Distinct keys in the memtable are counted exactly.
    assert len(db) == 100
    assert db
    db.flush()
    assert len(db) == 100
    for i in range(100):
        del db[b"%03d" % i]
    assert not db
    assert sum(1 for _ in db) == 0


def test_len_after_overwrites_is_an_estimate(db):
    for i in range(50):
        db[b"%03d" % i] = b"v1"
    db.flush()
    for i in range(50):
        db[b"%03d" % i] = b"v2"
    # The memtable and the sstable both count the key until compaction.
    assert len(db) >= 50
    db.compact()
    assert len(db) == 50


def test_sync_writes(path):
    with cleave.open(path, sync=True) as db:
        db[b"a"] = b"1"
        db.put(b"b", b"2", sync=False)
        assert db.stats()["wal_syncs"] >= 1
    with cleave.open(path) as db:
        assert db[b"a"] == b"1" and db[b"b"] == b"2"


def test_values_survive_reopen(path):
    with cleave.open(path) as db:
        for i in range(1000):
            db[b"key%04d" % i] = b"value%d" % i
        assert not db.closed
    assert db.closed
    with cleave.open(path, create_if_missing=False) as db:
        assert db[b"key0999"] == b"value999"
        assert sum(1 for _ in db) == 1000


def test_db_class_opens_as_open_does(path):
    with cleave.Db(path) as db:
        db[b"k"] = b"v"
        assert db.path == str(path)
        assert "open" in repr(db)
    assert "closed" in repr(db)


def test_large_key_is_refused(db):
    with pytest.raises(cleave.InvalidArgumentError, match="key of"):
        db[b"k" * ((64 << 10) + 1)] = b"v"


def test_in_reads_no_separated_value(path):
    """`key in db` stops at the key's entry: a separated value is not read."""
    with cleave.open(path, min_value_size=100, cache_values=False) as db:
        for i in range(50):
            db[b"k%03d" % i] = bytes([i]) * 4000
        del db[b"k007"]
        db.flush()
        before = db.stats()["value_reads"]
        assert all(b"k%03d" % i in db for i in range(50) if i != 7)
        assert b"k007" not in db and b"k999" not in db
        with db.snapshot() as snap:
            assert b"k008" in snap and b"k007" not in snap
        assert db.stats()["value_reads"] == before
        assert db[b"k008"] == bytes([8]) * 4000
        assert db.stats()["value_reads"] > before

"""keys/values/items: bounds, reverse, prefix (with its 0xff edge), the
iterator's own view, laziness and closing."""

import pytest

import cleave

KEYS = [b"", b"a", b"ab", b"abc", b"b", b"b\xff", b"b\xff\xff", b"c", b"\xff", b"\xff\xff", b"\xff\xff\x00"]


@pytest.fixture
def filled(db):
    for k in KEYS:
        db[k] = b"v" + k
    return db


def expected(start=None, stop=None, prefix=None):
    keys = sorted(KEYS)
    if start is not None:
        keys = [k for k in keys if k >= start]
    if stop is not None:
        keys = [k for k in keys if k < stop]
    if prefix is not None:
        keys = [k for k in keys if k.startswith(prefix)]
    return keys


def test_iter_keys_values_items_in_order(filled):
    keys = sorted(KEYS)
    assert list(filled) == keys
    assert list(filled.keys()) == keys
    assert list(filled.values()) == [b"v" + k for k in keys]
    assert list(filled.items()) == [(k, b"v" + k) for k in keys]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize(
    "start,stop",
    [(None, None), (b"ab", None), (None, b"b"), (b"ab", b"c"), (b"b", b"b"), (b"c", b"a"), (b"\xff", None)],
)
def test_bounds(filled, start, stop, reverse):
    want = expected(start, stop)
    if reverse:
        want = want[::-1]
    assert list(filled.keys(start=start, stop=stop, reverse=reverse)) == want
    assert list(filled.items(start, stop, reverse)) == [(k, b"v" + k) for k in want]
    assert list(filled.values(start=start, stop=stop, reverse=reverse)) == [b"v" + k for k in want]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("prefix", [b"", b"a", b"ab", b"b", b"b\xff", b"\xff", b"\xff\xff", b"zz"])
def test_prefix(filled, prefix, reverse):
    want = expected(prefix=prefix)
    if reverse:
        want = want[::-1]
    assert list(filled.keys(prefix=prefix, reverse=reverse)) == want


def test_prefix_of_0xff_bytes_runs_to_the_end(filled):
    # b"\xff" has no successor: the upper bound is the end of the key space.
    assert list(filled.keys(prefix=b"\xff")) == [b"\xff", b"\xff\xff", b"\xff\xff\x00"]
    assert list(filled.keys(prefix=b"\xff\xff", reverse=True)) == [b"\xff\xff\x00", b"\xff\xff"]
    # b"b\xff" ends before b"c": its successor.
    assert list(filled.keys(prefix=b"b\xff")) == [b"b\xff", b"b\xff\xff"]


def test_prefix_with_bounds_is_the_intersection(filled):
    assert list(filled.keys(prefix=b"a", start=b"ab")) == [b"ab", b"abc"]
    assert list(filled.keys(prefix=b"a", stop=b"abc")) == [b"a", b"ab"]
    assert list(filled.keys(prefix=b"a", start=b"b")) == []


def test_iteration_across_memtable_and_sstables(db):
    for i in range(0, 300, 3):
        db[b"%04d" % i] = b"sst"
    db.flush()
    for i in range(1, 300, 3):
        db[b"%04d" % i] = b"mem"
    for i in range(0, 300, 6):
        del db[b"%04d" % i]
    want = sorted([b"%04d" % i for i in range(0, 300, 3) if i % 6] + [b"%04d" % i for i in range(1, 300, 3)])
    assert list(db.keys()) == want
    assert list(db.keys(reverse=True)) == want[::-1]
    assert list(db.keys(start=b"0100", stop=b"0200", reverse=True)) == [k for k in want if b"0100" <= k < b"0200"][::-1]


def test_an_iterator_keeps_the_view_it_was_made_with(db):
    for i in range(10):
        db[b"%02d" % i] = b"old"
    it = db.items()
    first = next(it)
    db[b"05"] = b"new"
    del db[b"06"]
    db[b"99"] = b"added"
    db.flush()
    rest = list(it)
    assert first == (b"00", b"old")
    assert [k for k, _ in rest] == [b"%02d" % i for i in range(1, 10)]
    assert all(v == b"old" for _, v in rest)
    assert db[b"05"] == b"new"


def test_iterators_are_lazy_and_independent(db):
    for i in range(2000):
        db[b"%05d" % i] = b"x" * 100
    a = db.keys()
    b = db.keys(reverse=True)
    assert next(a) == b"00000"
    assert next(b) == b"01999"
    assert next(a) == b"00001"
    assert iter(a) is a
    assert sum(1 for _ in a) == 1998
    with pytest.raises(StopIteration):
        next(a)


def test_an_iterator_raises_closed_error_once_the_database_closes(path):
    db = cleave.open(path)
    for i in range(1000):
        db[b"%04d" % i] = b"v"
    it = db.keys()
    assert next(it) == b"0000"
    db.close()
    with pytest.raises(cleave.ClosedError):
        next(it)
    with pytest.raises(cleave.ClosedError):
        db.keys()
    # The directory's lock is released although the iterator still exists.
    with cleave.open(path) as again:
        assert again[b"0999"] == b"v"


def test_empty_database_and_empty_ranges(db):
    assert list(db) == []
    assert list(db.items(reverse=True)) == []
    db[b"k"] = b"v"
    assert list(db.keys(start=b"z")) == []
    assert list(db.keys(start=b"b", stop=b"a")) == []
    assert list(db.keys(prefix=b"q")) == []


def test_wrong_bound_types(db):
    with pytest.raises(TypeError):
        db.keys(start="a")
    with pytest.raises(TypeError):
        db.items(stop=3)

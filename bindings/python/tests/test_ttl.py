"""Values with a time to live: put(..., ttl=) on the Db and in a batch,
as seconds or a timedelta; the key reads as absent once the time has
passed (the waits are longer than the TTLs, so no timing is asserted), and
compaction frees the values without reading them."""

import datetime
import time

import pytest

import cleave


def test_a_value_with_a_ttl_reads_until_it_expires(db):
    db.put(b"short", b"v", ttl=0.05)
    db.put(b"long", b"w", ttl=datetime.timedelta(hours=1))
    db.put(b"plain", b"x")
    assert db[b"long"] == b"w"
    time.sleep(0.2)
    assert db.get(b"short") is None
    assert b"short" not in db
    assert db[b"long"] == b"w" and db[b"plain"] == b"x"
    assert [k for k, _ in db.items()] == [b"long", b"plain"]


def test_an_expired_value_hides_the_older_one(db):
    db.put(b"k", b"old")
    db.flush()
    db.put(b"k", b"new", ttl=0.05)
    time.sleep(0.2)
    assert db.get(b"k") is None
    db.compact()
    assert db.get(b"k") is None


def test_a_batch_puts_with_a_ttl(db):
    batch = db.write_batch()
    batch.put(b"a", b"1", ttl=0.05)
    batch.put(b"b", b"2", ttl=3600)
    db.write(batch)
    time.sleep(0.2)
    assert db.get(b"a") is None and db[b"b"] == b"2"


def test_compaction_frees_expired_values_unread(tmp_path):
    db = cleave.open(tmp_path / "db", min_value_size=512, enable_gc=False)
    for i in range(50):
        db.put(b"key%03d" % i, b"x" * 4096, ttl=0.05)
    db.flush()
    time.sleep(0.2)
    reads = db.stats()["value_reads"]
    db.compact()
    stats = db.stats()
    assert stats["expired_entries"] == 50
    assert stats["value_reads"] == reads
    assert stats["expired_value_bytes"] >= 50 * 4096
    db.close()


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), "10"])
def test_a_ttl_that_is_not_positive_is_refused(db, ttl):
    with pytest.raises((cleave.InvalidArgumentError, TypeError)):
        db.put(b"k", b"v", ttl=ttl)
    assert b"k" not in db

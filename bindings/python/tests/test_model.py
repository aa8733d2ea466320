"""A randomized test against a Python dict: random sequences of puts,
deletes, batches (some aborted), reads, bounded/reverse/prefix scans,
snapshots, flushes, compactions, GC and reopens, checked step by step."""

import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import cleave

# Few distinct bytes, so keys collide, share prefixes and hit the 0xff edge.
keys = st.lists(st.sampled_from([0x00, 0x01, 0x61, 0xFE, 0xFF]), max_size=3).map(bytes)
values = st.one_of(
    st.binary(max_size=40),
    # At least min_value_size (32): separated into value files.
    st.tuples(st.integers(32, 3000), st.integers(0, 255)).map(lambda t: bytes([t[1]]) * t[0]),
)
bounds = st.one_of(st.none(), keys)
ops = st.lists(
    st.one_of(st.tuples(st.just("put"), keys, values), st.tuples(st.just("delete"), keys, st.none())),
    max_size=8,
)

OPTIONS = dict(
    write_buffer_size=16 << 10,
    min_value_size=32,
    value_file_size=16 << 10,
    level0_file_num_compaction_trigger=2,
)


class Aborted(Exception):
    pass


def expected_keys(model, start, stop, prefix, reverse):
    out = sorted(model)
    if start is not None:
        out = [k for k in out if k >= start]
    if stop is not None:
        out = [k for k in out if k < stop]
    if prefix is not None:
        out = [k for k in out if k.startswith(prefix)]
    return out[::-1] if reverse else out


class DbMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="cleave-model-")
        self.db = cleave.open(self.dir, **OPTIONS)
        self.model = {}
        self.snapshots = []

    def teardown(self):
        for snap, _ in self.snapshots:
            snap.close()
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(key=keys, value=values)
    def put(self, key, value):
        self.db[key] = value
        self.model[key] = value

    @rule(key=keys)
    def delete(self, key):
        del self.db[key]
        self.model.pop(key, None)

    @rule(ops=ops, abort=st.booleans())
    def batch(self, ops, abort):
        try:
            with self.db.write_batch() as wb:
                for op, key, value in ops:
                    if op == "put":
                        wb[key] = value
                    else:
                        del wb[key]
                if abort:
                    raise Aborted()
        except Aborted:
            return
        for op, key, value in ops:
            if op == "put":
                self.model[key] = value
            else:
                self.model.pop(key, None)

    @rule(key=keys)
    def get(self, key):
        assert self.db.get(key) == self.model.get(key)
        assert (key in self.db) == (key in self.model)

    @rule(
        start=bounds,
        stop=bounds,
        prefix=bounds,
        reverse=st.booleans(),
        mode=st.sampled_from(["keys", "values", "items"]),
    )
    def scan(self, start, stop, prefix, reverse, mode):
        want = expected_keys(self.model, start, stop, prefix, reverse)
        got = list(getattr(self.db, mode)(start=start, stop=stop, prefix=prefix, reverse=reverse))
        if mode == "keys":
            assert got == want
        elif mode == "values":
            assert got == [self.model[k] for k in want]
        else:
            assert got == [(k, self.model[k]) for k in want]

    @precondition(lambda self: len(self.snapshots) < 3)
    @rule()
    def take_snapshot(self):
        self.snapshots.append((self.db.snapshot(), dict(self.model)))

    @precondition(lambda self: self.snapshots)
    @rule(data=st.data())
    def check_snapshot(self, data):
        i = data.draw(st.integers(0, len(self.snapshots) - 1))
        snap, model = self.snapshots[i]
        prefix = data.draw(bounds)
        reverse = data.draw(st.booleans())
        assert list(snap.items(prefix=prefix, reverse=reverse)) == [
            (k, model[k]) for k in expected_keys(model, None, None, prefix, reverse)
        ]
        key = data.draw(keys)
        assert snap.get(key) == model.get(key)
        if data.draw(st.booleans()):
            snap.close()
            del self.snapshots[i]

    @rule()
    def flush(self):
        self.db.flush()

    @rule()
    def compact(self):
        self.db.compact()

    @rule()
    def gc(self):
        self.db.gc(ratio=0.01)

    @rule()
    def reopen(self):
        for snap, _ in self.snapshots:
            snap.close()
        self.snapshots = []
        self.db.close()
        self.db = cleave.open(self.dir, create_if_missing=False, **OPTIONS)

    @invariant()
    def bool_is_exact(self):
        assert bool(self.db) == bool(self.model)


DbMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
test_db_against_a_dict = DbMachine.TestCase

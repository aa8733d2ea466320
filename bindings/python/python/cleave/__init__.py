"""cleave: an embedded key-value store (an LSM-tree that keeps large values
out of the tree), as a persistent, sorted dict of bytes.

    import cleave

    with cleave.open("/tmp/example") as db:
        db[b"apple"] = b"red"
        with db.write_batch() as batch:      # atomic
            batch[b"banana"] = b"yellow"
            del batch[b"apple"]
        for key, value in db.items(prefix=b"b"):
            print(key, value)

Every engine call releases the GIL, so threads sharing a ``Db`` run their
reads and writes in parallel.
"""

from ._errors import (
    ClosedError,
    CorruptionError,
    Error,
    InvalidArgumentError,
    IOError,
    LockedError,
    MergeError,
    NoSpaceError,
    PoisonedError,
    ReadOnlyError,
    SpaceBudgetExceededError,
    UnsupportedFormatError,
)
from ._cleave import (
    Db,
    Iterator,
    Snapshot,
    WriteBatch,
    __version__,
    default_options,
    open,
)

__all__ = [
    "ClosedError",
    "CorruptionError",
    "Db",
    "Error",
    "IOError",
    "InvalidArgumentError",
    "Iterator",
    "LockedError",
    "MergeError",
    "NoSpaceError",
    "PoisonedError",
    "ReadOnlyError",
    "Snapshot",
    "SpaceBudgetExceededError",
    "UnsupportedFormatError",
    "WriteBatch",
    "__version__",
    "default_options",
    "open",
]

"""The exceptions cleave raises: one class per kind of engine error.

Each message is the engine's, which names the file or the argument at
fault. Errors about a file carry it in ``path``; an ``IOError`` also has
the operating system's ``errno`` when there is one, a ``CorruptionError``
the ``offset`` in the file.
"""

from __future__ import annotations


class Error(Exception):
    """Base class of every error cleave raises."""


class CorruptionError(Error):
    """Bytes read from a file are not what was written there (a checksum
    mismatch, a malformed record); ``path`` names the file, ``offset`` where
    in it."""


class IOError(Error, OSError):
    """An operating-system call failed; ``path`` names the file and
    ``errno`` the OS error, when known. Also an ``OSError``."""


class InvalidArgumentError(Error, ValueError):
    """A key, value, option or argument cleave refuses; the message names
    it. Also a ``ValueError``."""


class LockedError(Error):
    """Another ``Db``, in this process or another, holds the database's
    lock; ``path`` names the directory."""


class PoisonedError(Error):
    """A write or fsync failed earlier: the database refuses writes until it
    is reopened, since the state on disk is no longer known."""


class NoSpaceError(Error):
    """No room to write: the file system is full (ENOSPC, in ``errno``) or
    over its quota where cleave wrote ``path``. Nothing is damaged and
    nothing of the write was applied: the database still serves reads, and
    takes writes again by itself once there is room (or on
    ``Db.resume()``)."""


class SpaceBudgetExceededError(NoSpaceError):
    """A write would take the database past the stop level of its space
    budget, and ``space_budget_fail_writes`` asked for an error; nothing of
    the write was applied. ``path`` names the directory."""


class ReadOnlyError(Error):
    """The database was opened read-only (``cleave.open(...,
    read_only=True)``): it takes no writes; ``path`` names the
    directory."""


class MergeError(Error):
    """Merging a key's operands failed: the merge operator refused them."""


class UnsupportedFormatError(Error):
    """A file was written by a format version this build does not read;
    ``path`` names it."""


class ClosedError(Error):
    """The database (or the snapshot) has been closed."""

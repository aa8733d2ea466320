"""Fixtures of the cleave package's tests: a database in a fresh directory."""

import pytest

import cleave


@pytest.fixture
def path(tmp_path):
    """A directory for one database (absent: cleave.open creates it)."""
    return tmp_path / "db"


@pytest.fixture
def db(path):
    """An open database with small memtables, closed after the test."""
    database = cleave.open(path, write_buffer_size=64 << 10)
    yield database
    database.close()

"""Fixtures for the xarray engine tests (``config`` comes from python/tests/conftest.py)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import gribmaker  # noqa: E402

fieldstore = pytest.importorskip("fieldstore")


def archive(config, fields):
    """Archive ``(key, message)`` pairs in the store of ``config``; returns them."""
    with fieldstore.FDB(config) as fdb:
        fdb.archive(b"".join(m for _, m in fields))
    return fields


class CountingFDB:
    """A fieldstore.FDB that counts the retrieves made and the fields read through it."""

    def __init__(self, fdb):
        self._fdb = fdb
        self.retrieves = []
        self.fields_read = 0

    def list(self, *args, **kwargs):
        return self._fdb.list(*args, **kwargs)

    def retrieve(self, request):
        self.retrieves.append(request)
        return _CountingReader(self, self._fdb.retrieve(request))

    @property
    def config(self):
        return self._fdb.config


class _CountingReader:
    def __init__(self, owner, reader):
        self._owner = owner
        self._reader = reader

    def __iter__(self):
        for field in self._reader:
            self._owner.fields_read += 1
            yield field

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._reader.close()


@pytest.fixture
def ensemble_store(config):
    """6 members x 3 steps x 2 levels x 2 params on a regular 15-degree grid."""
    return config, archive(config, gribmaker.ensemble(members=6))

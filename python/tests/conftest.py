"""Fixtures shared by every Python test suite (core, pyfdb, xarray, earthkit).

- ``config``: a dict config for a fresh local toc store under ``tmp_path`` (default schema);
  ``config_path``: the same written as YAML, with ``FDB_CONFIG_FILE`` pointing at it.
- ``fdb``: ``fieldstore.FDB(config)``.
- ``make_fields``: ``make_fields(steps=..., params=..., levels=..., numbers=None, npoints=100,
  **overrides) -> list[(key: dict, grib: bytes)]``, GRIB2 fields made by ``_native.make_field``.
- ``sample_fields``: ``make_fields()``: 2 params x 3 steps x 2 levels = 12 fields.
- ``store``: ``fdb`` with ``sample_fields`` archived and flushed.

Discovery is isolated: every test runs with the FDB_* variables unset and ``HOME`` and
``XDG_DATA_HOME`` under ``tmp_path``, so nothing reads or writes a real store.
"""

from __future__ import annotations

import itertools
import os

import pytest

import fieldstore
from fieldstore import _native

from testkeys import BASE_KEY, DB_REQUEST  # noqa: E402  (re-exported for fixtures)

_FDB_VARS = (
    "FDB_CONFIG",
    "FDB5_CONFIG",
    "FDB_CONFIG_FILE",
    "FDB5_CONFIG_FILE",
    "FDB_HOME",
    "FDB5_HOME",
    "FDB_SCHEMA_FILE",
    "FIELDSTORE_TOKEN",
)


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    for var in _FDB_VARS:
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))


@pytest.fixture
def root(tmp_path):
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def config(root):
    return {
        "type": "local",
        "engine": "toc",
        "spaces": [{"roots": [{"path": str(root)}]}],
    }


@pytest.fixture
def config_path(tmp_path, root, monkeypatch):
    path = tmp_path / "config.yaml"
    path.write_text(f"type: local\nengine: toc\nspaces:\n  - roots:\n      - path: {root}\n")
    monkeypatch.setenv("FDB_CONFIG_FILE", str(path))
    return path


@pytest.fixture
def fdb(config):
    return fieldstore.FDB(config)


def _make_fields(steps=(0, 6, 12), params=("130", "131"), levels=(500, 850), numbers=None,
                 npoints=100, **overrides):
    out = []
    numbers = list(numbers) if numbers is not None else [None]
    for number, param, level, step in itertools.product(numbers, params, levels, steps):
        key = dict(BASE_KEY, **overrides)
        key.update(step=str(step), levelist=str(level), param=str(param))
        if number is not None:
            key.update(type="pf", number=str(number))
        seed = hash((number, param, level, step)) & 0xFFFF
        out.append((key, _native.make_field(key, npoints, seed)))
    return out


@pytest.fixture
def make_fields():
    return _make_fields


@pytest.fixture
def sample_fields():
    return _make_fields()


@pytest.fixture
def store(fdb, sample_fields):
    fdb.archive(b"".join(data for _, data in sample_fields))
    fdb.flush()
    return fdb


def pytest_report_header(config):
    return f"fieldstore {fieldstore.__version__} ({os.path.dirname(fieldstore.__file__)})"

"""Fixtures for running the legacy pyfdb (PyPI ``pyfdb==0.1.3``, cffi, unmodified) on fieldstore's
libfdb5.so. Run by ``scripts/c-python-test``, which installs the library under ``target/fdb5``
and sets ``FDB5_HOME`` to it before Python starts, since pyfdb finds and loads the library at
import time (through findlibs).

- ``fields``: GRIB2 fields made with ecCodes, by (date, param, step).
- ``store``: a config dict for a fresh store under ``tmp_path`` with ``fields`` archived through
  ``fdb_archive_multiple`` and flushed.
"""

from __future__ import annotations

import itertools
import os

import pytest

import numpy as np
import eccodes as ec

DATES = [20240101, 20240102]
PARAMS = [167, 165]
STEPS = [0, 6]

REQUEST = {
    "class": "od",
    "expver": "0001",
    "stream": "oper",
    "date": DATES,
    "time": 1200,
    "domain": "g",
    "type": "fc",
    "levtype": "sfc",
    "step": STEPS,
    "param": PARAMS,
}

_FDB_VARS = ("FDB_CONFIG", "FDB5_CONFIG", "FDB_CONFIG_FILE", "FDB5_CONFIG_FILE", "FDB_HOME")


def make_message(date, param, step):
    gid = ec.codes_grib_new_from_samples("regular_ll_sfc_grib2")
    try:
        ec.codes_set(gid, "setLocalDefinition", 1)
        ec.codes_set(gid, "localDefinitionNumber", 1)
        for k, v in (("class", "od"), ("type", "fc"), ("stream", "oper"), ("expver", "0001")):
            ec.codes_set_string(gid, k, v)
        ec.codes_set(gid, "date", date)
        ec.codes_set(gid, "time", 1200)
        ec.codes_set(gid, "paramId", param)
        ec.codes_set(gid, "step", step)
        n = ec.codes_get(gid, "numberOfValues")
        rng = np.random.default_rng(date + param * 7 + step)
        ec.codes_set_values(gid, 250.0 + 30.0 * rng.random(n))
        return ec.codes_get_message(gid)
    finally:
        ec.codes_release(gid)


def decode(message):
    gid = ec.codes_new_from_message(message)
    try:
        return ec.codes_get_values(gid)
    finally:
        ec.codes_release(gid)


def key_of(date, param, step):
    """The full FDB key of a field made by ``make_message``, as the default schema splits it."""
    return {
        "class": "od",
        "expver": "0001",
        "stream": "oper",
        "date": str(date),
        "time": "1200",
        "domain": "g",
        "type": "fc",
        "levtype": "sfc",
        "step": str(step),
        "param": str(param),
    }


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    """No test reads a real store: the config comes from each test. FDB5_HOME stays (findlibs
    needed it at import) but names no etc/fdb/config.yaml."""
    for var in _FDB_VARS:
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))


@pytest.fixture(scope="session")
def fields():
    return {k: make_message(*k) for k in itertools.product(DATES, PARAMS, STEPS)}


@pytest.fixture
def config(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    return {"type": "local", "engine": "toc", "spaces": [{"roots": [{"path": str(root)}]}]}


@pytest.fixture
def store(config, fields):
    import pyfdb

    fdb = pyfdb.FDB(config)
    fdb.archive(b"".join(fields.values()))
    fdb.flush()
    return config


@pytest.fixture(scope="session")
def fdb5_home():
    home = os.environ.get("FDB5_HOME")
    if not home:
        pytest.fail("FDB5_HOME is not set: run these tests through scripts/c-python-test")
    return os.path.realpath(home)

"""Fixtures of the pyfdb compatibility tests: the store layout pyfdb 5.2x's own tests use.

96 surface analyses (4 dates x 8 times x 3 params, class ea) in a toc store with a three-level
schema, built with the eccodes package as pyfdb's tests build theirs.
"""

import itertools
import pathlib

import pytest
import yaml

pyfdb = pytest.importorskip("pyfdb", reason="the fieldstore-pyfdb package is not installed")
ec = pytest.importorskip("eccodes", reason="the eccodes package is needed to make test fields")

SCHEMA = """\
param:      Param;
step:       Step;
date:       Date;
levelist:   Double;
expver:     Expver;
time:       Time;

[ class, expver, stream, date, time, domain?
       [ type, levtype
               [ step, levelist?, param ]]
]
"""

DATES = [20200101, 20200102, 20200103, 20200104]
TIMES = [0, 300, 600, 900, 1200, 1500, 1800, 2100]
PARAMS = [167, 165, 166]  # 2t, 10u, 10v: surface parameters (pyfdb's 131/132 are rewritten by its metkit)


def make_message(date, time, param, seed=0, cls="ea"):
    """One GRIB2 surface analysis with distinct values (so bytes differ field to field)."""
    gid = ec.codes_grib_new_from_samples("regular_ll_sfc_grib2")
    try:
        ec.codes_set(gid, "setLocalDefinition", 1)
        ec.codes_set(gid, "localDefinitionNumber", 1)
        for k, v in (("class", cls), ("type", "an"), ("stream", "oper"), ("expver", "0001")):
            ec.codes_set_string(gid, k, v)
        ec.codes_set(gid, "date", date)
        ec.codes_set(gid, "time", time)
        ec.codes_set(gid, "paramId", param)
        n = ec.codes_get(gid, "numberOfValues")
        base = (date % 100) * 10.0 + time / 100.0 + param + seed
        ec.codes_set_values(gid, [base + (i % 37) * 0.5 for i in range(n)])
        return ec.codes_get_message(gid)
    finally:
        ec.codes_release(gid)


@pytest.fixture(scope="session")
def grib_messages():
    """``{(date, time, param): bytes}`` for the whole data set."""
    return {(d, t, p): make_message(d, t, p) for d, t, p in itertools.product(DATES, TIMES, PARAMS)}


@pytest.fixture(scope="session")
def grib_file(grib_messages, tmp_path_factory):
    path = tmp_path_factory.mktemp("grib") / "test_data.grib"
    path.write_bytes(b"".join(grib_messages.values()))
    return path


def write_config(base: pathlib.Path) -> pathlib.Path:
    """A local toc config with its own schema and root under ``base``; its path."""
    schema = base / "schema"
    schema.write_text(SCHEMA)
    root = base / "db_store"
    root.mkdir()
    config = dict(
        type="local",
        engine="toc",
        schema=str(schema),
        spaces=[dict(handler="Default", roots=[{"path": str(root)}])],
    )
    path = base / "fdb_config.yaml"
    path.write_text(yaml.dump(config))
    return path


@pytest.fixture
def message_maker():
    return make_message


@pytest.fixture
def make_config():
    return write_config


@pytest.fixture
def empty_fdb_setup(tmp_path) -> pathlib.Path:
    return write_config(tmp_path)


@pytest.fixture
def read_only_fdb_setup(empty_fdb_setup, grib_file) -> pathlib.Path:
    with pyfdb.FDB(empty_fdb_setup) as fdb:
        fdb.archive(grib_file.read_bytes())
    return empty_fdb_setup


@pytest.fixture
def selection():
    return {
        "type": "an",
        "class": "ea",
        "domain": "g",
        "expver": "0001",
        "stream": "oper",
        "date": "20200101",
        "levtype": "sfc",
        "step": "0",
        "param": ["167", "131", "132"],
        "time": "1800",
    }

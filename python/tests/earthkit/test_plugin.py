"""earthkit-data's source "fieldstore" (our plugin): no pyfdb, no environment variable."""

import importlib.util
import os
import sys

import numpy as np
import pytest

ekd = pytest.importorskip("earthkit.data")
fieldstore = pytest.importorskip("fieldstore")
pytest.importorskip("eccodes")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "xarray"))
import gribmaker  # noqa: E402

REQUEST = {
    "class": "od",
    "expver": "0001",
    "stream": "enfo",
    "date": "20261122",
    "time": "1200",
    "type": "pf",
}
FDB_VARIABLES = (
    "FDB_HOME",
    "FDB5_HOME",
    "FDB_CONFIG",
    "FDB5_CONFIG",
    "FDB_CONFIG_FILE",
    "FDB5_CONFIG_FILE",
)


@pytest.fixture(autouse=True)
def no_pyfdb_no_environment(monkeypatch):
    """Prove independence: the real pyfdb is absent, any pyfdb unimportable, no FDB variable set."""
    assert importlib.util.find_spec("fdb5lib") is None, (
        "the real pyfdb's library must not be installed here"
    )
    monkeypatch.setitem(sys.modules, "pyfdb", None)  # `import pyfdb` now raises ImportError
    for name in FDB_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def store(tmp_path):
    config = {"type": "local", "engine": "toc", "spaces": [{"roots": [{"path": str(tmp_path)}]}]}
    fields = gribmaker.ensemble(members=3, steps=(0, 6), levels=(500, 850), params=(130, 131))
    with fieldstore.FDB(config) as fdb:
        fdb.archive(b"".join(m for _, m in fields))
    return config, fields


def _expected(fields):
    """ecCodes' own decoding of what was archived, by (shortName, level, number, step)."""
    out = {}
    for key, message in fields:
        d = gribmaker.decode(message)
        out[(d["shortName"], int(key["levelist"]), int(key["number"]), int(key["step"]))] = d[
            "values"
        ]
    return out


def _ident(field):
    # earthkit 1.x's component keys: a lazy (virtual) field answers them from its request, while
    # its GRIB keys (metadata("level")) come from a reference field.
    step = field.get("time.step")
    return (
        field.get("parameter.variable"),
        int(field.get("vertical.level")),
        int(field.get("ensemble.member")),
        int(step / np.timedelta64(1, "h"))
        if isinstance(step, np.timedelta64)
        else int(step.total_seconds() // 3600),
    )


def _assert_same(fields_iterable, fields):
    expected = _expected(fields)
    seen = set()
    for field in fields_iterable:
        ident = _ident(field)
        np.testing.assert_array_equal(np.asarray(field.to_numpy()).ravel(), expected[ident])
        seen.add(ident)
    assert seen == set(expected)


def test_pyfdb_really_is_unimportable():
    with pytest.raises(ImportError):
        import pyfdb  # noqa: F401


def test_field_list_equals_the_archived_fields(store):
    config, fields = store
    fl = ekd.from_source("fieldstore", REQUEST, config=config).to_fieldlist()
    assert len(fl) == len(fields)
    _assert_same(fl, fields)
    assert fl.to_numpy().shape == (len(fields), 13, 24)


def test_sel_and_metadata(store):
    config, fields = store
    fl = ekd.from_source(
        "fieldstore", request=dict(REQUEST, param="130"), config=config
    ).to_fieldlist()
    assert len(fl) == 12
    assert set(fl.metadata("shortName")) == {"t"}
    picked = fl.sel({"vertical.level": 850, "ensemble.member": 2})
    assert len(picked) == 2
    assert sorted(int(s) for s in picked.metadata("step")) == [0, 6]


def test_stream(store):
    config, fields = store
    data = ekd.from_source("fieldstore", REQUEST, config=config, stream=True)
    _assert_same(data.to_fieldlist(), fields)


def test_lazy(store):
    config, fields = store
    fl = ekd.from_source("fieldstore", REQUEST, config=config, lazy=True).to_fieldlist()
    assert len(fl) == len(fields)
    _assert_same(fl, fields)


def test_to_xarray(store):
    config, fields = store
    ds = ekd.from_source("fieldstore", REQUEST, config=config).to_xarray()
    assert set(ds.data_vars) == {"t", "u"}
    expected = _expected(fields)
    t = ds["t"]
    for (short, level, number, step), values in expected.items():
        if short != "t":
            continue
        sel = {}
        for dim, value in (
            ("level", level),
            ("member", number),
            ("step", np.timedelta64(step, "h")),
        ):
            if dim in t.dims:
                coord = t[dim].values
                sel[dim] = (
                    type(coord[0])(value) if dim == "member" and coord.dtype.kind == "U" else value
                )
        np.testing.assert_array_equal(t.sel(sel).values.ravel(), values)


def test_an_open_handle_can_be_given(store):
    config, fields = store
    fdb = fieldstore.FDB(config)
    fl = ekd.from_source("fieldstore", REQUEST, fdb=fdb).to_fieldlist()
    assert len(fl) == len(fields)


def test_two_requests_are_refused(store):
    config, _ = store
    with pytest.raises(ValueError, match="exactly one request"):
        ekd.from_source("fieldstore", [REQUEST, REQUEST], config=config)


def test_a_request_matching_nothing_gives_an_empty_list(store):
    config, _ = store
    fl = ekd.from_source("fieldstore", dict(REQUEST, date="19990101"), config=config).to_fieldlist()
    assert len(fl) == 0


def test_a_mars_string_request(store):
    config, fields = store
    text = "class=od,expver=1,stream=enfo,date=20261122,time=12,type=pf,param=t,levelist=500"
    fl = ekd.from_source("fieldstore", text, config=config).to_fieldlist()
    assert len(fl) == 6
    _assert_same(fl, [(k, m) for k, m in fields if k["param"] == "130" and k["levelist"] == "500"])
    lazy = ekd.from_source("fieldstore", text, config=config, lazy=True).to_fieldlist()
    assert len(lazy) == 6

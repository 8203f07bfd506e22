"""earthkit-data's ``fdb`` source on the legacy pyfdb 0.1.3 on fieldstore's libfdb5.so: stream,
file and lazy modes give the archived fields (values as ecCodes decodes the archived bytes).
earthkit-data 1.3 tells the legacy pyfdb from pyfdb 5 by the absence of ``pyfdb.ListElement``
and then lists with ``fdb.list(request, True, True)``."""

import numpy as np
import pytest
import yaml

import earthkit.data as ekd
import pyfdb
from conftest import REQUEST, decode


@pytest.fixture(autouse=True)
def temporary_cache(tmp_path):
    with ekd.config.temporary({"cache-policy": "temporary", "temporary-cache-directory-root": str(tmp_path)}):
        yield


def check(fieldlist, fields, grib_keys=True):
    """Every archived field comes back once with its values; lazy fields answer ecCodes keys
    from earthkit's reference field, so they are identified by the listed keys only."""
    seen = set()
    for f in fieldlist:
        base = f.get("time.base_datetime")
        short = f.get("parameter.variable")
        param = {"2t": 167, "10u": 165}[short]
        key = (int(base.strftime("%Y%m%d")), param, int(f.get("time.step").total_seconds() // 3600))
        if grib_keys:
            assert (int(f.metadata("date")), int(f.metadata("paramId")), int(f.metadata("step"))) == key
        np.testing.assert_array_equal(f.to_numpy(flatten=True), decode(fields[key]))
        seen.add(key)
    assert seen == set(fields)


def test_earthkit_sees_the_legacy_api():
    assert not hasattr(pyfdb, "ListElement")


def test_stream(store, fields):
    check(ekd.from_source("fdb", REQUEST, config=store, stream=True).to_fieldlist(), fields)


def test_stream_read_all(store, fields):
    fl = ekd.from_source("fdb", REQUEST, config=store).to_fieldlist(read_all=True)
    assert len(fl) == len(fields)
    check(fl, fields)


def test_file(store, fields):
    fl = ekd.from_source("fdb", REQUEST, config=store, stream=False).to_fieldlist()
    assert len(fl) == len(fields)
    check(fl, fields)


def test_lazy(store, fields):
    fl = ekd.from_source("fdb", REQUEST, config=store, lazy=True).to_fieldlist()
    assert len(fl) == len(fields)
    check(fl, fields, grib_keys=False)


def test_config_from_the_environment(store, fields, monkeypatch):
    # Without config=, earthkit wants FDB_HOME or FDB5_CONFIG set; pyfdb then calls fdb_new_handle.
    monkeypatch.setenv("FDB5_CONFIG", yaml.safe_dump(store))
    fl = ekd.from_source("fdb", dict(REQUEST, date=20240102, param=165, step=6)).to_fieldlist(read_all=True)
    assert len(fl) == 1
    np.testing.assert_array_equal(fl[0].to_numpy(flatten=True), decode(fields[(20240102, 165, 6)]))


def test_nothing_matches(store):
    fl = ekd.from_source("fdb", dict(REQUEST, date=20230101), config=store).to_fieldlist(read_all=True)
    assert len(fl) == 0


def test_a_replaced_field_comes_once(store, fields):
    """Regression: fieldstore's fdb_list took ``duplicates=True`` as "list masked copies too",
    so earthkit-data's ``list(request, True, True)`` gave a re-archived field twice; FDB5 passes
    it on as ``deduplicate`` and gives each key once."""
    fdb = pyfdb.FDB(store)
    fdb.archive(fields[(20240101, 167, 0)])
    fdb.flush()
    fl = ekd.from_source("fdb", REQUEST, config=store, lazy=True).to_fieldlist()
    assert len(fl) == len(fields)
    check(fl, fields, grib_keys=False)

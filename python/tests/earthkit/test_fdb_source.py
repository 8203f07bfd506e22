"""earthkit-data 1.x's ``fdb`` source reading fieldstore through the ``pyfdb`` compatibility module.

Stream, non-stream (file) and lazy modes each give the archived fields: same values as ecCodes
decoding the archived bytes, same metadata.
"""

import itertools

import pytest
import yaml

ekd = pytest.importorskip("earthkit.data", reason="earthkit-data is not installed")
ec = pytest.importorskip("eccodes", reason="the eccodes package is needed to make and decode test fields")
np = pytest.importorskip("numpy")
pyfdb = pytest.importorskip("pyfdb", reason="the fieldstore-pyfdb package is not installed")
if not hasattr(pyfdb, "__fieldstore_version__"):
    pytest.skip("the pyfdb found is not fieldstore's compatibility module", allow_module_level=True)

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

DATES = [20240101, 20240102]
PARAMS = [167, 165]
STEPS = [0, 6]


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
        return ec.codes_get_values(gid), {k: ec.codes_get(gid, k) for k in ("paramId", "date", "time", "step")}
    finally:
        ec.codes_release(gid)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A config dict of a store holding the fields, and the archived fields by (date, param, step)."""
    base = tmp_path_factory.mktemp("ekstore")
    (base / "schema").write_text(SCHEMA)
    (base / "root").mkdir()
    config = {
        "type": "local",
        "engine": "toc",
        "schema": str(base / "schema"),
        "spaces": [{"handler": "Default", "roots": [{"path": str(base / "root")}]}],
    }
    fields = {(d, p, s): make_message(d, p, s) for d, p, s in itertools.product(DATES, PARAMS, STEPS)}
    with pyfdb.FDB(config) as fdb:
        fdb.archive(b"".join(fields.values()))
    return config, fields


REQUEST = {
    "class": "od",
    "expver": "0001",
    "stream": "oper",
    "date": [20240101, 20240102],
    "time": 1200,
    "domain": "g",
    "type": "fc",
    "levtype": "sfc",
    "step": [0, 6],
    "param": [167, 165],
}


SHORT_NAMES = {167: "2t", 165: "10u"}


def check(fieldlist, fields, grib_keys=True):
    """Every archived field comes back once, with its values and metadata.

    Lazy fields answer ecCodes keys such as ``date`` from earthkit's reference field (earthkit's
    own behaviour, whatever the source), so they are identified by the component keys only.
    """
    by_components = {(d, SHORT_NAMES[p], s): (d, p, s) for d, p, s in fields}
    seen = set()
    for f in fieldlist:
        base = f.get("time.base_datetime")
        component_key = (
            int(base.strftime("%Y%m%d")),
            f.get("parameter.variable"),
            int(f.get("time.step").total_seconds() // 3600),
        )
        assert base.hour == 12
        key = by_components[component_key]
        values, meta = decode(fields[key])
        if grib_keys:
            assert (int(f.metadata("date")), int(f.metadata("paramId")), int(f.metadata("step"))) == key
            assert int(f.metadata("time")) == meta["time"]
        np.testing.assert_array_equal(f.to_numpy(flatten=True), values)
        seen.add(key)
    assert seen == set(fields)


@pytest.fixture(autouse=True)
def temporary_cache(tmp_path):
    with ekd.config.temporary({"cache-policy": "temporary", "temporary-cache-directory-root": str(tmp_path)}):
        yield


def test_stream(store):
    config, fields = store
    ds = ekd.from_source("fdb", REQUEST, config=config, stream=True)
    check(ds.to_fieldlist(), fields)


def test_stream_to_fieldlist(store):
    config, fields = store
    fl = ekd.from_source("fdb", REQUEST, config=config).to_fieldlist(read_all=True)
    assert len(fl) == len(fields)
    check(fl, fields)


def test_file(store):
    config, fields = store
    fl = ekd.from_source("fdb", REQUEST, config=config, stream=False).to_fieldlist()
    assert len(fl) == len(fields)
    check(fl, fields)


def test_lazy(store):
    config, fields = store
    fl = ekd.from_source("fdb", REQUEST, config=config, lazy=True).to_fieldlist()
    assert len(fl) == len(fields)
    check(fl, fields, grib_keys=False)


def test_config_as_yaml_text(store):
    config, fields = store
    ds = ekd.from_source("fdb", dict(REQUEST, date=20240102, param=165, step=6), config=yaml.dump(config))
    fl = ds.to_fieldlist(read_all=True)
    assert len(fl) == 1
    check_one = fields[(20240102, 165, 6)]
    np.testing.assert_array_equal(fl[0].to_numpy(flatten=True), decode(check_one)[0])


def test_nothing_matches(store):
    config, _ = store
    fl = ekd.from_source("fdb", dict(REQUEST, date=20230101), config=config).to_fieldlist(read_all=True)
    assert len(fl) == 0


def test_user_config_is_passed_through(store):
    # earthkit-data hands user_config to pyfdb.FDB by that name (it inspects FDB.__init__)
    config, fields = store
    ds = ekd.from_source(
        "fdb", dict(REQUEST, date=20240101, param=167, step=0), config=config, user_config={"useSubToc": True}
    )
    fl = ds.to_fieldlist(read_all=True)
    assert len(fl) == 1
    np.testing.assert_array_equal(fl[0].to_numpy(flatten=True), decode(fields[(20240101, 167, 0)])[0])

"""Module-level helpers, corrupt data, and the package's public names."""

import pytest

import fieldstore
from testkeys import BASE_KEY


def test_versions():
    assert fieldstore.__version__.count(".") == 2
    assert fieldstore.eccodes_version()[0].isdigit()


def test_make_field_makes_grib_with_the_keys(fdb):
    key = dict(BASE_KEY, step="6", levelist="500", param="130")
    data = fieldstore.make_field(key, npoints=50, seed=3)
    assert data.startswith(b"GRIB") and data.endswith(b"7777")
    assert data != fieldstore.make_field(key, npoints=50, seed=4)
    fdb.archive(data)
    fdb.flush()
    (el,) = fdb.list()
    assert {k: el.key[k] for k in key} == key
    with pytest.raises(TypeError):
        fieldstore.make_field("class=od")


def test_a_damaged_field_raises_corrupt_naming_it(store):
    (el,) = store.list(dict(BASE_KEY, step="6", levelist="500", param="130"))
    with open(el.path, "r+b") as f:
        f.seek(el.offset + el.length // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
    r = store.retrieve(dict(BASE_KEY, step="6", levelist="500", param="130"))
    with pytest.raises(fieldstore.CorruptError) as e:
        r.read()
    assert e.value.kind == "corrupt"
    # The undamaged fields still read.
    ok = store.retrieve(dict(BASE_KEY, step="0", levelist="500", param="130"))
    assert ok.read().startswith(b"GRIB")


def test_public_names_exist():
    for name in fieldstore.__all__:
        assert hasattr(fieldstore, name), name

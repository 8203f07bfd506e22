"""list / inspect: ListElement as pyfdb 5.2x hands it out."""

import os

import pytest
from pyfdb import FDB, ListElement

FULL = {
    "type": "an",
    "class": "ea",
    "domain": "g",
    "expver": "0001",
    "stream": "oper",
    "date": "20200101",
    "levtype": "sfc",
    "step": "0",
    "time": "1800",
}


def test_list_empty_store(empty_fdb_setup):
    fdb = FDB(empty_fdb_setup)
    assert list(fdb.list(FULL, level=3)) == []
    assert list(fdb.list({}, level=3)) == []


def test_list_partial_level1(read_only_fdb_setup):
    assert len(list(FDB(read_only_fdb_setup).list({"type": "an"}, level=1))) == 32


@pytest.mark.parametrize("level, expected", [(3, 10), (2, 8), (1, 6)])
def test_combined_key_per_level(read_only_fdb_setup, level, expected):
    elements = list(FDB(read_only_fdb_setup).list({"type": "an"}, level=level))
    assert elements
    for element in elements:
        key = element.combined_key()
        assert len(key) == expected
        assert list(key) == sorted(key)
        if level >= 2:
            assert key["type"] == "an"
        else:
            assert "type" not in key
        if level == 3:
            assert element.has_location()
            assert element.offset() is not None and element.length() > 0
        else:
            assert not element.has_location()
            assert element.offset() is None and element.length() is None
            assert element.uri is None and element.data_handle is None


@pytest.mark.parametrize("level", [3, 2, 1])
def test_keys_per_level(read_only_fdb_setup, level):
    for element in FDB(read_only_fdb_setup).list({"type": "an"}, level=level):
        keys = element.keys()
        assert len(keys) == 3
        assert len(keys[0]) == 6
        assert keys[1] == ({"levtype": "sfc", "type": "an"} if level >= 2 else {})
        if level == 3:
            assert set(keys[2]) == {"param", "step"}
        else:
            assert keys[2] == {}


def test_element_attributes_read_only(read_only_fdb_setup):
    for el in FDB(read_only_fdb_setup).list(FULL):
        with pytest.raises(AttributeError):
            el.data_handle = None
        with pytest.raises(AttributeError):
            el.uri = None
    with pytest.raises(TypeError):
        ListElement(None)


def test_element_location_and_bytes(read_only_fdb_setup, grib_messages):
    elements = list(FDB(read_only_fdb_setup).list(dict(FULL, param="167")))
    assert len(elements) == 1
    el = elements[0]
    expected = grib_messages[(20200101, 1800, 167)]
    assert el.length() == len(expected)
    assert os.path.isfile(el.uri.path())
    with open(el.uri.path(), "rb") as f:
        f.seek(el.offset())
        assert f.read(el.length()) == expected
    with el.data_handle as dh:
        assert dh.size() == len(expected)
        assert dh.read() == expected
    text = repr(el)
    assert text.startswith("{class=ea,expver=0001,stream=oper,date=20200101,time=1800")
    assert f"length={len(expected)}" in text


def test_list_item_holding_a_list_is_an_error(read_only_fdb_setup):
    with pytest.raises(RuntimeError, match="UserError"):
        list(FDB(read_only_fdb_setup).list(dict(FULL, param=["165/166/167"])))


def test_unknown_keyword_is_runtime_error(read_only_fdb_setup):
    with pytest.raises(RuntimeError) as info:
        list(FDB(read_only_fdb_setup).list(dict(FULL, foo="1")))
    assert "foo" in str(info.value)
    if "fieldstore" in repr(type(info.value).__mro__):
        assert isinstance(info.value, ValueError)


def test_masked_after_archiving_again(read_only_fdb_setup, grib_messages):
    fdb = FDB(read_only_fdb_setup)
    fdb.archive(grib_messages[(20200101, 1800, 167)])
    fdb.flush()
    sel = dict(FULL, param="167")
    assert len(list(fdb.list(sel))) == 1
    assert len(list(fdb.list(sel, include_masked=True))) == 2


def test_listing_outlives_handle(read_only_fdb_setup):
    iterator = FDB(read_only_fdb_setup).list({"date": "20200102"})
    assert len(list(iterator)) == 24

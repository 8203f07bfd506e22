"""retrieve and DataHandle: pyfdb 5.2x usage, plus the defects this module fixes."""

import io
import shutil

import pytest

try:  # absent only when this suite is run against the real pyfdb, to check the tests
    import fieldstore
except ImportError:
    fieldstore = None
from pyfdb import FDB

SEL = {
    "type": "an",
    "class": "ea",
    "domain": "g",
    "expver": "0001",
    "stream": "oper",
    "date": "20200101",
    "levtype": "sfc",
    "step": "0",
    "param": ["167", "165", "166"],
    "time": "1800",
}


def one(param="167"):
    return dict(SEL, param=param)


def test_retrieve_read_header(read_only_fdb_setup):
    dh = FDB(read_only_fdb_setup).retrieve(SEL)
    assert dh
    assert "Closed" in repr(dh)
    dh.open()
    assert "Opened" in repr(dh)
    assert dh.read(4) == b"GRIB"
    assert dh.read(4) != b"GRIB"
    dh.close()


def test_read_before_open(read_only_fdb_setup):
    dh = FDB(read_only_fdb_setup).retrieve(SEL)
    with pytest.raises(RuntimeError, match="Must be opened first"):
        dh.read(4)
    with pytest.raises(RuntimeError):
        dh.readinto(memoryview(bytearray(4)))


def test_wildcard_retrieve(read_only_fdb_setup):
    with pytest.raises(TypeError):
        FDB(read_only_fdb_setup).retrieve({})


def test_bytes_equal_archived(read_only_fdb_setup, grib_messages):
    expected = grib_messages[(20200101, 1800, 167)]
    with FDB(read_only_fdb_setup).retrieve(one()) as dh:
        assert dh.size() == len(expected)
        assert dh.read() == expected
        assert dh.read() == b""


def test_readinto_and_copyfileobj(read_only_fdb_setup, grib_messages):
    expected = grib_messages[(20200101, 1800, 167)]
    fdb = FDB(read_only_fdb_setup)
    with fdb.retrieve(one()) as dh:
        buf = bytearray(4)
        assert dh.readinto(memoryview(buf)) == 4
        assert buf == b"GRIB"
    out = io.BytesIO()
    with fdb.retrieve(one()) as dh:
        shutil.copyfileobj(dh, out)
    assert out.getvalue() == expected


def test_readall_opens_itself(read_only_fdb_setup, grib_messages):
    dh = FDB(read_only_fdb_setup).retrieve(one())
    assert dh.readall() == grib_messages[(20200101, 1800, 167)]
    assert not dh.opened


def test_reopen_starts_again(read_only_fdb_setup):
    dh = FDB(read_only_fdb_setup).retrieve(one())
    with dh:
        first = dh.read(100)
    with dh:
        assert dh.read(100) == first


def test_missing_field_gives_empty_handle(read_only_fdb_setup):
    dh = FDB(read_only_fdb_setup).retrieve(one("999"))
    assert dh
    with dh:
        assert dh.size() == 0
        assert dh.read(10) == b""
        assert dh.read() == b""
    assert dh.readall() == b""


@pytest.mark.parametrize("bad", [{"foo": "1"}, {"step": "abc"}, {"date": "notadate"}])
def test_bad_request(read_only_fdb_setup, bad):
    with pytest.raises(RuntimeError) as info:
        FDB(read_only_fdb_setup).retrieve(dict(one(), **bad)).readall()
    if fieldstore is not None:
        assert isinstance(info.value, fieldstore.Error)
    if fieldstore is not None:
        assert isinstance(info.value, ValueError)
    assert str(info.value).startswith("UserError")


def test_datahandle_not_user_constructible():
    from pyfdb import DataHandle

    with pytest.raises(TypeError):
        DataHandle(None)


def test_one_handle_shared_by_threads(read_only_fdb_setup, grib_messages):
    from concurrent.futures import ThreadPoolExecutor

    fdb = FDB(read_only_fdb_setup)
    keys = [(d, t, p) for (d, t, p) in grib_messages if t in (0, 1200)]

    def fetch(key):
        d, t, p = key
        sel = dict(SEL, date=str(d), time=f"{t:04d}", param=str(p))
        return key, fdb.retrieve(sel).readall()

    with ThreadPoolExecutor(max_workers=4) as pool:
        for key, data in pool.map(fetch, keys):
            assert data == grib_messages[key], key

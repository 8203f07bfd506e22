"""FDB.extract and _native.extract_message: ranges of grid points, checked against a full decode
(fieldstore.Message(...).values)."""

import numpy as np
import pytest

import fieldstore
from fieldstore import _native

from testkeys import BASE_KEY

needs_fdb_extract = pytest.mark.skipif(
    not hasattr(fieldstore.FDB, "extract"), reason="fieldstore's extract is not built yet (no FDB.extract)")
needs_message_extract = pytest.mark.skipif(
    not hasattr(_native, "extract_message"), reason="this build has no _native.extract_message")

RANGES = [(0, 3), (10, 75), (99, 100)]


def expected(message, ranges):
    values = fieldstore.Message(message).values
    return [values[lo:hi] for lo, hi in ranges]


def mask_bits(words, n):
    bits = np.unpackbits(np.asarray(words, dtype="<u8").view(np.uint8), bitorder="little")
    return bits[:n].astype(bool)


def check(extraction, message, ranges):
    assert len(extraction.values) == len(ranges) == len(extraction.masks)
    for got, mask, want, (lo, hi) in zip(extraction.values, extraction.masks, expected(message, ranges), ranges):
        assert got.dtype == np.float64 and mask.dtype == np.uint64
        assert got.shape == (hi - lo,) and mask.shape == ((hi - lo + 63) // 64,)
        np.testing.assert_array_equal(got, want)
        assert (mask_bits(mask, hi - lo) == ~np.isnan(want)).all()


@needs_fdb_extract
def test_extract_every_field_in_retrieve_order(store, sample_fields):
    request = dict(BASE_KEY, param="131/130", levelist="500", step="12/0")
    found = store.extract(request, RANGES)
    # retrieve's order, each field once.
    order = [(f.key["param"], f.key["step"]) for f in found]
    assert order == [(i.key["param"], i.key["step"]) for i in store.retrieve(request).fields]
    assert sorted(order) == [("130", "0"), ("130", "12"), ("131", "0"), ("131", "12")]
    by_key = {(k["param"], k["levelist"], k["step"]): data for k, data in sample_fields}
    for f in found:
        assert f.key["levelist"] == "500" and f.key["class"] == "od"
        data = by_key[(f.key["param"], "500", f.key["step"])]
        check(f, data, RANGES)
        assert f.grid_hash == fieldstore.Message(data).metadata("md5GridSection")
        assert 0 < f.bytes_read <= len(data)


@needs_fdb_extract
def test_extract_mars_string_request(store, sample_fields):
    key, data = sample_fields[0]
    text = ",".join(f"{k}={v}" for k, v in key.items())
    (found,) = store.extract(text, [(5, 6)])
    check(found, data, [(5, 6)])


@needs_fdb_extract
@pytest.mark.parametrize("ranges,message", [
    ([], "at least one range"),
    ([(3, 3)], "lo < hi"),
    ([(5, 9), (0, 2)], "ascending"),
    ([(0, 5), (4, 9)], "ascending"),
    ([(-1, 2)], "lo < hi"),
    ("0-5", "not a str"),
    ([(1, 2, 3)], "pair"),
])
def test_extract_bad_ranges(store, ranges, message):
    with pytest.raises((ValueError, TypeError), match=message):
        store.extract(dict(BASE_KEY, param="130", levelist="500", step="0"), ranges)


@needs_fdb_extract
def test_extract_needs_request(store):
    with pytest.raises(TypeError):
        store.extract(None, [(0, 1)])


@needs_message_extract
def test_extract_message_matches_decode(sample_fields):
    _, data = sample_fields[0]
    got = _native.extract_message(data, RANGES)
    assert got.key is None
    check(got, data, RANGES)
    assert got.grid_hash == fieldstore.Message(data).metadata("md5GridSection")
    # Any buffer, not only bytes.
    check(_native.extract_message(memoryview(bytearray(data)), [(1, 4)]), data, [(1, 4)])


@needs_message_extract
def test_extract_message_errors(sample_fields):
    _, data = sample_fields[0]
    with pytest.raises(fieldstore.Error):
        _native.extract_message(b"GRIB not really", [(0, 1)])
    with pytest.raises(fieldstore.BadRequestError):
        _native.extract_message(data, [(0, 10**9)])
    with pytest.raises(ValueError):
        _native.extract_message(data, [(4, 2)])


needs_extract_index = pytest.mark.skipif(
    not hasattr(fieldstore.FDB, "extract_index"), reason="this build has no FDB.extract_index")


@needs_extract_index
def test_extract_index_describes_fields_stored_without_it(tmp_path, make_fields):
    # An FDB5-format database: fieldstore makes no side file there unasked (FDB5's fdb-wipe
    # refuses unknown files), so its large fields start without extraction information.
    root = tmp_path / "fdb5root"
    root.mkdir()
    fdb = fieldstore.FDB({"type": "local", "engine": "toc", "format": "fdb5",
                          "spaces": [{"roots": [{"path": str(root)}]}]})
    fields = make_fields(steps=(0, 6), params=("130",), levels=(500,), npoints=20000)
    fdb.archive(b"".join(data for _, data in fields))
    fdb.flush()
    request = dict(BASE_KEY, param="130", levelist="500", step="0/6")
    assert not list(root.rglob("*.extract"))
    before = fdb.extract(request, [(5, 6)])
    assert all(f.bytes_read >= len(data) for f, (_, data) in zip(before, fields))

    dry = fdb.extract_index(request, dry_run=True)
    assert dry["fields"] == 2 and dry["added"] == 2 and dry["already"] == 0
    assert not list(root.rglob("*.extract")), "a dry run writes nothing"

    done = fdb.extract_index(request)
    assert done["added"] == 2 and done["side_files"] >= 1 and done["bytes_read"] > 0
    assert list(root.rglob("*.extract"))
    after = fdb.extract(request, [(5, 6)])
    by_step = {k["step"]: data for k, data in fields}
    for f in after:
        data = by_step[f.key["step"]]
        check(f, data, [(5, 6)])
        assert f.bytes_read < len(data)

    again = fdb.extract_index("retrieve," + ",".join(f"{k}={v}" for k, v in request.items()))
    assert again["already"] == 2 and again["added"] == 0


@needs_extract_index
def test_extract_index_needs_a_request_and_a_local_config(fdb):
    with pytest.raises(TypeError, match="needs a request"):
        fdb.extract_index(None)
    remote = fieldstore.FDB({"type": "remote", "host": "127.0.0.1", "port": 9})
    with pytest.raises(fieldstore.Error):
        remote.extract_index(dict(BASE_KEY, param="130", levelist="500", step="0"))

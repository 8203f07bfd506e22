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

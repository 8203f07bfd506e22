"""fieldstore.Message against the eccodes Python package, grid by grid."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import fieldstore
from fieldstore import _native

eccodes = pytest.importorskip("eccodes")

Message = _native.Message


def _ramp(n: int) -> list[float]:
    return [250.0 + (i % 97) * 0.5 for i in range(n)]


def _from_sample(name: str, longs: dict | None = None, values: bool = True) -> bytes:
    h = eccodes.codes_grib_new_from_samples(name)
    try:
        for k, v in (longs or {}).items():
            eccodes.codes_set(h, k, v)
        if values:
            eccodes.codes_set(h, "bitsPerValue", 16)
            n = eccodes.codes_get(h, "numberOfDataPoints")
            eccodes.codes_set_values(h, _ramp(n))
        return eccodes.codes_get_message(h)
    finally:
        eccodes.codes_release(h)


def _octahedral(n: int = 32) -> bytes:
    half = [20 + 4 * i for i in range(n)]
    pl = half + half[::-1]
    h = eccodes.codes_grib_new_from_samples("reduced_gg_pl_32_grib2")
    try:
        eccodes.codes_set_array(h, "pl", pl)
        eccodes.codes_set(h, "numberOfDataPoints", sum(pl))
        eccodes.codes_set(h, "bitsPerValue", 16)
        eccodes.codes_set_values(h, _ramp(sum(pl)))
        return eccodes.codes_get_message(h)
    finally:
        eccodes.codes_release(h)


def _lambert() -> bytes:
    h = eccodes.codes_grib_new_from_samples("GRIB2")
    try:
        eccodes.codes_set(h, "gridDefinitionTemplateNumber", 30)
        # Rows south to north: ecCodes 2.28 (Debian's, which fieldstore links) pairs points and
        # values differently from later versions when rows run north to south.
        eccodes.codes_set(h, "jScansPositively", 1)
        for k, v in {"Nx": 20, "Ny": 15, "DxInMetres": 20000, "DyInMetres": 20000,
                     "latitudeOfFirstGridPoint": 40_000_000,
                     "longitudeOfFirstGridPoint": 350_000_000, "LaD": 50_000_000,
                     "LoV": 10_000_000, "Latin1": 50_000_000, "Latin2": 50_000_000,
                     "bitsPerValue": 16}.items():
            eccodes.codes_set(h, k, v)
        eccodes.codes_set_values(h, _ramp(300))
        return eccodes.codes_get_message(h)
    finally:
        eccodes.codes_release(h)


def _with_bitmap() -> bytes:
    h = eccodes.codes_grib_new_from_samples("regular_ll_sfc_grib2")
    try:
        eccodes.codes_set(h, "bitmapPresent", 1)
        eccodes.codes_set(h, "bitsPerValue", 16)
        v = _ramp(496)
        for i in (0, 7, 100, 495):
            v[i] = 9999.0
        eccodes.codes_set_values(h, v)
        return eccodes.codes_get_message(h)
    finally:
        eccodes.codes_release(h)


GRIDS = {
    "regular_ll": lambda: _from_sample("regular_ll_sfc_grib2"),
    "regular_ll_grib1": lambda: _from_sample("GRIB1"),
    "regular_gg": lambda: _from_sample("regular_gg_sfc_grib2"),
    "reduced_gg_N96": lambda: _from_sample("reduced_gg_pl_96_grib2"),
    "reduced_gg_grib1": lambda: _from_sample("reduced_gg_pl_32_grib1", values=False),
    "octahedral_O32": _octahedral,
    "reduced_ll": lambda: _from_sample("reduced_ll_sfc_grib2"),
    "rotated_ll": lambda: _from_sample("rotated_ll_sfc_grib2"),
    "reduced_rotated_gg": lambda: _from_sample("reduced_rotated_gg_sfc_grib2"),
    "polar_stereographic": lambda: _from_sample(
        "polar_stereographic_sfc_grib2", longs={"jScansPositively": 1}),
    "lambert": _lambert,
    "bitmap": _with_bitmap,
}


def _reference(data: bytes):
    h = eccodes.codes_new_from_message(data)
    try:
        values = np.array(eccodes.codes_get_values(h), dtype=np.float64)
        if eccodes.codes_get(h, "bitmapPresent"):
            values[values == eccodes.codes_get(h, "missingValue")] = np.nan
        lat = np.array(eccodes.codes_get_array(h, "latitudes"))
        lon = np.array(eccodes.codes_get_array(h, "longitudes"))
        keys = {k: eccodes.codes_get(h, k) for k in
                ("gridType", "shortName", "numberOfDataPoints", "edition",
                 "latitudeOfFirstGridPointInDegrees", "jScansPositively")}
        pl = eccodes.codes_get_array(h, "pl") if eccodes.codes_is_defined(h, "pl") else None
        return values, lat, lon, keys, pl
    finally:
        eccodes.codes_release(h)


@pytest.mark.parametrize("grid", sorted(GRIDS))
def test_grids_decode_as_eccodes_does(grid):
    data = GRIDS[grid]()
    values, lat, lon, keys, pl = _reference(data)
    m = Message(data)
    got = m.to_numpy()
    assert got.dtype == np.float64 and got.shape == values.shape
    np.testing.assert_allclose(got, values, rtol=1e-9, atol=1e-9, equal_nan=True)
    np.testing.assert_allclose(m.values, got, equal_nan=True)
    assert m.number_of_values == values.size
    # Unrotated coordinates differ by up to 4e-6 degrees (0.4 m) between the system's ecCodes
    # 2.28 and pip's 2.50 (the reference here).
    atol = 1e-5 if "rotated" in grid else 1e-6
    np.testing.assert_allclose(m.latitudes, lat, rtol=0, atol=atol)
    np.testing.assert_allclose(m.longitudes, lon, rtol=0, atol=atol)
    for k, v in keys.items():
        assert m.metadata(k) == v, k
    g = m.grid
    assert g["gridType"] == keys["gridType"]
    if pl is not None:
        assert list(g["pl"]) == list(pl)
        np.testing.assert_array_equal(m.metadata("pl"), pl)
        assert m.metadata("pl").dtype == np.int64
        assert "Ni" not in g  # coded as missing on reduced grids
    else:
        assert "pl" not in g


def test_missing_points_are_nan():
    m = Message(_with_bitmap())
    v = m.to_numpy()
    assert np.isnan(v[[0, 7, 100, 495]]).all()
    assert np.isnan(v).sum() == 4
    assert m.metadata("numberOfMissing") == 4


def test_octahedral_grid_is_recognised():
    m = Message(_octahedral())
    assert m.metadata("isOctahedral") == 1
    assert m.grid["isOctahedral"] == 1
    assert m.number_of_values == sum(20 + 4 * i for i in range(32)) * 2
    assert m.longitudes[1] == pytest.approx(18.0)


def test_spherical_harmonics_have_values_but_no_coordinates():
    data = _from_sample("sh_sfc_grib2", values=False)
    m = Message(data)
    h = eccodes.codes_new_from_message(data)
    try:
        ref = eccodes.codes_get_values(h)
    finally:
        eccodes.codes_release(h)
    np.testing.assert_allclose(m.to_numpy(), ref)
    assert m.grid["gridType"] == "sh"
    with pytest.raises(fieldstore.UnsupportedError) as e:
        m.latitudes
    assert isinstance(e.value, NotImplementedError)
    assert "sh" in str(e.value)
    with pytest.raises(NotImplementedError):
        m.longitudes


def test_metadata_types_and_missing_keys():
    m = Message(_from_sample("regular_ll_sfc_grib2"))
    assert m.metadata("Ni") == 16 and isinstance(m.metadata("Ni"), int)
    assert isinstance(m.metadata("latitudeOfFirstGridPointInDegrees"), float)
    assert m.metadata("gridType") == "regular_ll"
    assert m.metadata("no_such_key", None) is None
    assert m.metadata("no_such_key", default=42) == 42
    assert m.metadata("Ni", default=42) == 16
    with pytest.raises(TypeError):
        m.metadata("Ni", 1, 2)
    with pytest.raises(TypeError):
        m.metadata("Ni", dflt=1)
    with pytest.raises(fieldstore.NotFoundError) as e:
        m.metadata("no_such_key")
    assert isinstance(e.value, KeyError)
    assert str(e.value) == "the GRIB message has no key 'no_such_key'"


def test_mars_keys_of_a_made_field():
    keys = {"class": "od", "stream": "enfo", "type": "pf", "expver": "0001",
            "date": "20261122", "time": "1200", "step": "6", "levtype": "pl",
            "levelist": "500", "param": "130", "number": "3"}
    m = Message(_native.make_field(keys, 100, 1))
    mk = m.mars_keys
    for k, v in keys.items():
        assert mk[k] == v, k
    assert "shortName=t" in repr(m)


def test_accepts_any_buffer():
    data = _from_sample("regular_gg_sfc_grib2")
    ref = Message(data).to_numpy()
    for form in (bytearray(data), memoryview(data), np.frombuffer(data, dtype=np.uint8)):
        np.testing.assert_array_equal(Message(form).to_numpy(), ref)
    assert Message(data).data == data


def test_bad_input_gives_clear_errors():
    data = _from_sample("regular_ll_sfc_grib2")
    with pytest.raises(fieldstore.BadRequestError) as e:
        Message(b"definitely not grib")
    assert isinstance(e.value, ValueError) and "no GRIB message" in str(e.value)
    with pytest.raises(fieldstore.BadRequestError, match="found 2"):
        Message(data + data)
    with pytest.raises(fieldstore.BadRequestError):
        Message(data[:-10])
    with pytest.raises(TypeError):
        Message(12)
    with pytest.raises(TypeError):
        Message("GRIB")
    # Well framed, garbage inside: an exception or an answer, never a crash.
    junk = data[:16] + bytes([0x5A]) * (len(data) - 20) + b"7777"
    try:
        m = Message(junk)
    except fieldstore.Error:
        return
    for attr in ("values", "latitudes", "grid", "mars_keys"):
        try:
            getattr(m, attr)
        except fieldstore.Error:
            pass


DAMAGED = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
    "crates", "fieldstore", "tests", "data", "damaged-grib",
)

# Damaged messages found by fuzzing: each crashed the process (SIGSEGV in ecCodes) or made it
# allocate gigabytes, through values, grid or metadata, before fieldstore checked the message's
# layout. With the words of the error each gives.
DAMAGED_FILES = {
    "grib1-nj-minus-2.grib": "Nj=-2",
    "grib2-data-section-short.grib": "1493192704 coded values for 9 points",
    "grib2-values-not-points.grib": "N=16711680",
    "grib1-gaussian-n-35327.grib": "N=35327",
    "grib1-gaussian-rows-of-0.grib": "pl[",
    "grib2-bitmap-over-millions-of-values.grib": "822083584 coded values for 11 points",
    "grib2-coordinates-over-damaged-data.grib": "268435456 coded values for 2664 points",
    "grib2-predefined-bitmap-over-millions-of-values.grib": "773849088 coded values",
    "grib2-bitmap-short.grib": "pl of Nj=64 entries",
    "grib1-349-million-points.grib": "349407948 points announced",
    "grib2-spectral-j-damaged.grib": "spectral truncation",
    "grib2-unknown-packing.grib": "ecCodes does not know the packing",
    "grib1-predefined-grid-bitmap.grib": "values for 1369 points",
    "grib1-time-unit-31.grib": "indicatorOfUnitOfTimeRange=31 is no unit of time",
    "grib1-binary-scale-missing.grib": "136 of pl",
    "grib1-pl-rows-beyond-section-2.grib": "holds its lists from octet 33",
    "grib1-pl-rows-of-0-at-open.grib": "pl[0]=0",
    "grib1-binary-scale-missing-2.grib": "binaryScaleFactor coded as missing",
}

_READ_DAMAGED = """
import sys
import fieldstore
from fieldstore import _native
data = open(sys.argv[1], "rb").read()
try:
    m = _native.Message(data)
except fieldstore.BadRequestError as e:
    print("open:", e)
else:
    for what in ("values", "latitudes", "longitudes", "grid", "number_of_values"):
        try:
            getattr(m, what)
        except fieldstore.Error as e:
            print(what + ":", type(e).__name__, e)
        else:
            print(what + ": ok")
    for key in ("maximum", "numberOfMissing", "bitmap", "pl"):
        try:
            m.metadata(key, None)
        except fieldstore.Error as e:
            print(key + ":", type(e).__name__, e)
print("alive")
"""


@pytest.mark.parametrize("name", sorted(DAMAGED_FILES))
def test_a_damaged_message_is_an_error_and_the_interpreter_lives_on(name):
    # In a child interpreter, so that a crash is this test's failure rather than pytest's death.
    r = subprocess.run(
        [sys.executable, "-c", _READ_DAMAGED, os.path.join(DAMAGED, name)],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-2000:]}"
    lines = r.stdout.splitlines()
    assert lines[-1] == "alive", r.stdout
    first = lines[0]
    assert DAMAGED_FILES[name] in first, r.stdout
    if not first.startswith("open:"):
        assert first.startswith("values: BadRequestError"), r.stdout


def test_values_of_a_damaged_message_raise_a_fieldstore_error():
    data = bytearray(_from_sample("regular_ll_sfc_grib2"))
    # Section 5 announces 100 coded values for the 496 points, and there is no bitmap.
    pos = 16
    while data[pos + 4] != 5:
        pos += int.from_bytes(data[pos:pos + 4], "big")
    data[pos + 5:pos + 9] = (100).to_bytes(4, "big")
    m = Message(bytes(data))
    with pytest.raises(fieldstore.BadRequestError, match="100 coded values for 496 points"):
        m.values
    with pytest.raises(fieldstore.BadRequestError):
        m.to_numpy()
    with pytest.raises(fieldstore.BadRequestError):
        m.metadata("maximum")
    # The header stays readable.
    assert m.metadata("Ni") == 16


def test_arrays_are_owned_by_python():
    m = Message(_from_sample("regular_ll_sfc_grib2"))
    a = m.to_numpy()
    assert a.flags.writeable and a.flags.c_contiguous
    a[:] = 0
    assert m.to_numpy()[0] == pytest.approx(250.0)
    del m
    assert a.sum() == 0


def test_one_message_shared_by_threads():
    data = GRIDS["reduced_gg_N96"]()
    m = Message(data)
    ref = m.to_numpy()
    lat = m.latitudes
    errors = []

    def work():
        try:
            for _ in range(10):
                np.testing.assert_array_equal(m.to_numpy(), ref)
                np.testing.assert_array_equal(m.latitudes, lat)
                assert m.metadata("N") == 96
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors

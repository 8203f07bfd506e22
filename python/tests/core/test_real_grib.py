"""Real GRIB files from other centres, both editions (tests/data/real-grib): archived through the
Python API, listed, retrieved field by field, and decoded to the same values and coordinates as
the eccodes package gives for the original messages; the files FDB5 refuses are refused whole."""

import os

import numpy as np
import pytest

import fieldstore

eccodes = pytest.importorskip("eccodes", reason="the eccodes package is the reference decoder")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DATA = os.path.join(REPO, "tests", "data", "real-grib")
SCHEMA = os.path.join(REPO, "crates", "fieldstore", "tests", "fixtures", "ecmwf-fdb5-schema")

# The files FDB5 archives (crates/fieldstore-cli/tests/real_grib.rs), with their message counts.
ACCEPTED = {
    "era5-levels-members.grib": 160,
    "forecast_monthly_ukmo.grib": 168,
    "ncep-seasonal-monthly.grib": 372,
    "single_gridpoint.grib": 6,
    "cams-egg4-monthly.grib": 4,
    "alternate-scanning.grib": 1,
    "hpa_and_pa.grib": 3,
    "t_on_different_level_types.grib": 2,
}
REFUSED = {
    "era5-levels-corrupted.grib": "7777",
    "lambert_grid.grib": "no schema rule matches",
    "step_60m.grib": "no schema rule matches",
}


def reference(message):
    h = eccodes.codes_new_from_message(message)
    try:
        values = np.array(eccodes.codes_get_values(h), dtype=np.float64)
        if eccodes.codes_get(h, "bitmapPresent"):
            values[values == eccodes.codes_get(h, "missingValue")] = np.nan
        lat = np.array(eccodes.codes_get_array(h, "latitudes"))
        lon = np.array(eccodes.codes_get_array(h, "longitudes"))
        return values, lat, lon, eccodes.codes_get(h, "edition")
    finally:
        eccodes.codes_release(h)


@pytest.fixture
def ecmwf_fdb(config):
    return fieldstore.FDB(dict(config, schema=SCHEMA))


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_real_files_round_trip_and_decode_as_eccodes_does(ecmwf_fdb, name):
    data = open(os.path.join(DATA, name), "rb").read()
    summary = ecmwf_fdb.archive(data)
    assert summary.messages == ACCEPTED[name]
    ecmwf_fdb.flush()
    listed = list(ecmwf_fdb.list())
    assert len(listed) == ACCEPTED[name]
    editions = set()
    for el in listed:
        with ecmwf_fdb.retrieve(el.key) as reader:
            fields = list(reader)
        assert len(fields) == 1
        field = fields[0]
        # The bytes are one of the file's messages, whole, and the listing's length.
        assert field.data[:4] == b"GRIB" and field.data[-4:] == b"7777"
        assert len(field.data) == el.length and data.find(field.data) >= 0
        values, lat, lon, edition = reference(field.data)
        editions.add(edition)
        np.testing.assert_allclose(field.to_numpy(), values, rtol=0, atol=0, equal_nan=True)
        np.testing.assert_allclose(field.latitudes, lat, rtol=0, atol=1e-6)
        np.testing.assert_allclose(field.longitudes, lon, rtol=0, atol=1e-6)
    assert editions


def test_both_editions_are_covered():
    seen = set()
    for name in ACCEPTED:
        data = open(os.path.join(DATA, name), "rb").read()
        seen.add(data[7])
    assert seen == {1, 2}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_files_fdb5_refuses_are_refused_whole(ecmwf_fdb, name):
    data = open(os.path.join(DATA, name), "rb").read()
    with pytest.raises(fieldstore.Error) as e:
        ecmwf_fdb.archive(data)
    assert REFUSED[name] in str(e.value)
    ecmwf_fdb.flush()
    assert list(ecmwf_fdb.list()) == []

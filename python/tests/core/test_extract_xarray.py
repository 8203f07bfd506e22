"""fieldstore.extraction: a time series and an area as xarray objects, values equal to a full
decode at the grid points the coordinates name."""

import numpy as np
import pytest

import fieldstore

from testkeys import BASE_KEY

xr = pytest.importorskip("xarray")
extraction = pytest.importorskip("fieldstore.extraction")


def full(data):
    m = fieldstore.Message(data)
    return m.values, m.latitudes, m.longitudes


def test_series_along_steps_at_the_nearest_point(fdb, make_fields):
    fields = make_fields(steps=(0, 6, 12, 18), params=("130",), levels=(500,), npoints=400)
    fdb.archive(b"".join(d for _, d in fields))
    fdb.flush()
    request = dict(BASE_KEY, param="130", levelist="500", step="0/6/12/18")
    ts = extraction.series(fdb, request, 30.0, 40.0)
    assert ts.dims == ("step",)
    assert list(ts["step"].values) == [np.timedelta64(h, "h") for h in (0, 6, 12, 18)]
    by_step = {k["step"]: d for k, d in fields}
    values, lats, lons = full(by_step["0"])
    i = int(ts["index"])
    # The nearest grid point: no other is closer (in degrees, longitudes wrapped).
    dlon = np.abs(((lons - 40.0) + 180) % 360 - 180)
    dist = (lats - 30.0) ** 2 + dlon**2
    assert dist[i] <= dist.min() + 1e-9
    assert float(ts["latitude"]) == pytest.approx(lats[i]) and float(ts["longitude"]) == pytest.approx(lons[i])
    for step, got in zip((0, 6, 12, 18), ts.values):
        want = full(by_step[str(step)])[0][i]
        assert got == want or (np.isnan(got) and np.isnan(want))
    assert ts["valid_time"].values[1] == np.datetime64("2026-11-22T18:00", "ns")
    assert ts.attrs["mars_param"] == "130"


def test_area_points_and_coordinates(fdb, make_fields):
    fields = make_fields(steps=(0, 6), params=("130",), levels=(500,), npoints=400)
    fdb.archive(b"".join(d for _, d in fields))
    fdb.flush()
    request = dict(BASE_KEY, param="130", levelist="500", step="0/6")
    a = extraction.area(fdb, request, (40, 0, 20, 60))
    assert a.dims == ("step", "point") and a.sizes["point"] > 0
    values, lats, lons = full(dict((k["step"], d) for k, d in fields)["6"])
    idx = a["index"].values
    np.testing.assert_array_equal(a.sel(step=np.timedelta64(6, "h")).values, values[idx])
    np.testing.assert_allclose(a["latitude"].values, lats[idx])
    assert ((a["latitude"].values <= 40) & (a["latitude"].values >= 20)).all()


def test_places_outside_the_world_are_refused(fdb, make_fields):
    fields = make_fields(steps=(0,), params=("130",), levels=(500,))
    fdb.archive(b"".join(d for _, d in fields))
    fdb.flush()
    with pytest.raises(fieldstore.Error, match="latitude"):
        extraction.series(fdb, dict(BASE_KEY, param="130", levelist="500", step="0"), 95, 0)

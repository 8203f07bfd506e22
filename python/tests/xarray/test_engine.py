"""engine="fieldstore": values, coordinates and laziness, checked against ecCodes itself."""

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
fieldstore = pytest.importorskip("fieldstore")

import gribmaker  # noqa: E402
from storetools import CountingFDB, archive  # noqa: E402

REQUEST = {
    "class": "od",
    "expver": "0001",
    "stream": "enfo",
    "date": "20261122",
    "time": "1200",
    "type": "pf",
}
NAMES = {"130": "t", "131": "u"}


def hours(n):
    return np.timedelta64(n, "h")


def _select(ds, key):
    return ds[NAMES[key["param"]]].sel(
        number=int(key["number"]),
        step=hours(int(key["step"])),
        isobaricInhPa=float(key["levelist"]),
    )


def test_the_engine_is_registered():
    assert "fieldstore" in xr.backends.list_engines()


def test_ensemble_values_equal_eccodes(ensemble_store):
    config, fields = ensemble_store
    ds = xr.open_dataset(REQUEST, engine="fieldstore", backend_kwargs={"config": config})
    assert set(ds.data_vars) == {"t", "u"}
    assert dict(ds["t"].sizes) == {
        "number": 6,
        "step": 3,
        "isobaricInhPa": 2,
        "latitude": 13,
        "longitude": 24,
    }
    assert ds["t"].dims == ("number", "step", "isobaricInhPa", "latitude", "longitude")
    assert ds["t"].dtype == np.float64
    ds = ds.load()
    for key, message in fields:
        expected = gribmaker.decode(message)
        got = _select(ds, key).values
        np.testing.assert_array_equal(
            got, expected["values"].reshape(expected["Nj"], expected["Ni"])
        )


def test_coordinates_are_what_eccodes_and_the_store_say(ensemble_store):
    config, fields = ensemble_store
    ds = xr.open_dataset(REQUEST, engine="fieldstore", config=config)
    first = gribmaker.decode(fields[0][1])
    lats = first["latitudes"].reshape(first["Nj"], first["Ni"])
    lons = first["longitudes"].reshape(first["Nj"], first["Ni"])
    np.testing.assert_array_equal(ds["latitude"].values, lats[:, 0])
    np.testing.assert_array_equal(ds["longitude"].values, lons[0, :])
    assert ds["number"].values.tolist() == [1, 2, 3, 4, 5, 6]
    np.testing.assert_array_equal(ds["step"].values, np.array([0, 6, 12], dtype="timedelta64[h]"))
    # cfgrib's order: pressure decreasing upwards.
    assert ds["isobaricInhPa"].values.tolist() == [850.0, 500.0]
    assert ds["isobaricInhPa"].attrs["units"] == "hPa"
    assert ds["isobaricInhPa"].attrs["fieldstore_key"] == "levelist"
    assert ds["time"].values == np.datetime64("2026-11-22T12:00")
    np.testing.assert_array_equal(
        ds["valid_time"].values, np.datetime64("2026-11-22T12:00") + ds["step"].values
    )
    t = ds["t"]
    assert t.attrs["units"] == "K"
    assert t.attrs["GRIB_paramId"] == 130
    assert t.attrs["standard_name"] == "air_temperature"
    assert t.attrs["long_name"] == "Temperature"


def test_open_reads_no_values_and_a_selection_reads_only_its_fields(ensemble_store):
    config, fields = ensemble_store
    fdb = CountingFDB(fieldstore.FDB(config))
    ds = xr.open_dataset(REQUEST, engine="fieldstore", fdb=fdb)
    # One field per variable, for its name, attributes and grid: no value array is read.
    assert fdb.fields_read == 2
    opened = len(fdb.retrieves)
    fdb.fields_read = 0

    part = ds["t"].sel(number=2, step=hours(6)).values
    assert part.shape == (2, 13, 24)
    assert len(fdb.retrieves) == opened + 1, "one retrieve for the whole selection"
    assert fdb.fields_read == 2, "the two levels of member 2 at step 6, nothing else"
    for level in (850, 500):
        key = {"param": "130", "number": "2", "step": "6", "levelist": str(level)}
        expected = next(m for k, m in fields if all(k[n] == v for n, v in key.items()))
        got = ds["t"].sel(number=2, step=hours(6), isobaricInhPa=float(level)).values
        np.testing.assert_array_equal(got.ravel(), gribmaker.decode(expected)["values"])


def test_a_point_selection_still_reads_whole_fields_but_only_those(ensemble_store):
    config, _ = ensemble_store
    fdb = CountingFDB(fieldstore.FDB(config))
    ds = xr.open_dataset(REQUEST, engine="fieldstore", fdb=fdb)
    fdb.fields_read = 0
    series = ds["u"].isel(latitude=3, longitude=[0, 5]).sel(isobaricInhPa=500.0).values
    assert series.shape == (6, 3, 2)
    assert fdb.fields_read == 18
    full = ds["u"].sel(isobaricInhPa=500.0).values
    np.testing.assert_array_equal(series, full[:, :, 3, [0, 5]])


def test_reduced_gaussian_grid_has_a_values_dimension(config):
    fields = archive(
        config,
        gribmaker.ensemble(
            members=3, steps=(0, 6), levels=(500,), params=(130,), grid="reduced_gg"
        ),
    )
    ds = xr.open_dataset(REQUEST, engine="fieldstore", config=config)
    first = gribmaker.decode(fields[0][1])
    assert ds["t"].dims == ("number", "step", "values")
    assert ds["t"].shape == (3, 2, first["values"].size)
    assert ds["latitude"].dims == ("values",)
    np.testing.assert_array_equal(ds["latitude"].values, first["latitudes"])
    np.testing.assert_array_equal(ds["longitude"].values, first["longitudes"])
    # One level only: a scalar coordinate, as cfgrib makes it.
    assert ds["isobaricInhPa"].ndim == 0 and float(ds["isobaricInhPa"]) == 500.0
    ds = ds.load()
    for key, message in fields:
        got = ds["t"].sel(number=int(key["number"]), step=hours(int(key["step"]))).values
        np.testing.assert_array_equal(got, gribmaker.decode(message)["values"])


def test_missing_fields_are_nan_and_do_not_fail_open(config):
    fields = gribmaker.ensemble(members=3, steps=(0, 6), levels=(500,), params=(130,))
    gone = [k for k, _ in fields if k["number"] == "2" and k["step"] == "6"]
    kept = [(k, m) for k, m in fields if not (k["number"] == "2" and k["step"] == "6")]
    assert len(gone) == 1
    archive(config, kept)
    ds = xr.open_dataset(REQUEST, engine="fieldstore", config=config)
    assert ds["t"].shape == (3, 2, 13, 24)
    values = ds["t"].values
    assert np.isnan(values[1, 1]).all()
    assert (
        not np.isnan(values[0]).any()
        and not np.isnan(values[2]).any()
        and not np.isnan(values[1, 0]).any()
    )


def test_mars_string_request_and_float32(ensemble_store):
    config, fields = ensemble_store
    ds = xr.open_dataset(
        "class=od,expver=1,stream=enfo,date=20261122,time=12,type=pf,param=t,number=1/2,step=0/6",
        engine="fieldstore",
        config=config,
        dtype="float32",
    )
    assert list(ds.data_vars) == ["t"]
    assert dict(ds["t"].sizes) == {
        "number": 2,
        "step": 2,
        "isobaricInhPa": 2,
        "latitude": 13,
        "longitude": 24,
    }
    assert ds["t"].dtype == np.float32
    key, message = next(
        (k, m)
        for k, m in fields
        if k["param"] == "130"
        and k["number"] == "2"
        and k["step"] == "6"
        and k["levelist"] == "850"
    )
    expected = gribmaker.decode(message)["values"].astype(np.float32).reshape(13, 24)
    np.testing.assert_array_equal(_select(ds, key).values, expected)


def test_two_dates_make_a_time_dimension_and_valid_time(config):
    fields = gribmaker.ensemble(
        members=2, steps=(0, 6), levels=(500,), params=(130,), date="20261122"
    )
    fields += gribmaker.ensemble(
        members=2, steps=(0, 6), levels=(500,), params=(130,), date="20261123", time="0000"
    )
    archive(config, fields)
    request = {k: v for k, v in REQUEST.items() if k not in ("date", "time")}
    request["date"] = ["20261122", "20261123"]
    request["time"] = ["0000", "1200"]
    ds = xr.open_dataset(request, engine="fieldstore", config=config)
    assert ds["t"].dims[:3] == ("number", "time", "step")
    np.testing.assert_array_equal(
        ds["time"].values,
        np.array(["2026-11-22T12:00", "2026-11-23T00:00"], dtype="datetime64[ns]"),
    )
    assert ds["valid_time"].dims == ("time", "step")
    assert ds["valid_time"].values[1, 1] == np.datetime64("2026-11-23T06:00")
    for key, message in fields:
        stamp = (
            np.datetime64("2026-11-22T12:00")
            if key["date"] == "20261122"
            else np.datetime64("2026-11-23T00:00")
        )
        got = (
            ds["t"].sel(number=int(key["number"]), time=stamp, step=hours(int(key["step"]))).values
        )
        np.testing.assert_array_equal(got.ravel(), gribmaker.decode(message)["values"])


def test_a_request_matching_nothing_is_a_clear_error(ensemble_store):
    config, _ = ensemble_store
    with pytest.raises(ValueError, match="matches no field"):
        xr.open_dataset(dict(REQUEST, date="19990101"), engine="fieldstore", config=config)


def test_drop_variables(ensemble_store):
    config, _ = ensemble_store
    ds = xr.open_dataset(REQUEST, engine="fieldstore", config=config, drop_variables=["u"])
    assert list(ds.data_vars) == ["t"]


def test_same_as_cfgrib_on_the_same_file(ensemble_store, tmp_path):
    cfgrib = pytest.importorskip("cfgrib")  # noqa: F841
    config, fields = ensemble_store
    path = tmp_path / "ens.grib"
    path.write_bytes(b"".join(m for _, m in fields))
    ours = xr.open_dataset(REQUEST, engine="fieldstore", config=config).load()
    theirs = xr.open_dataset(path, engine="cfgrib", backend_kwargs={"indexpath": ""}).load()
    assert ours["t"].dims == theirs["t"].dims
    for name in ("number", "step", "isobaricInhPa", "latitude", "longitude", "valid_time", "time"):
        np.testing.assert_array_equal(ours[name].values, theirs[name].values)
    # cfgrib decodes to float32 by default.
    np.testing.assert_array_equal(ours["t"].values.astype(np.float32), theirs["t"].values)


def test_dask_chunks_and_pickling(ensemble_store):
    pytest.importorskip("dask")
    import pickle

    config, fields = ensemble_store
    ds = xr.open_dataset(REQUEST, engine="fieldstore", config=config, chunks={"number": 1})
    again = pickle.loads(pickle.dumps(ds))
    key, message = fields[5]
    np.testing.assert_array_equal(
        _select(again, key).values.ravel(), gribmaker.decode(message)["values"]
    )


def test_surface_and_pressure_levels_in_one_dataset(config):
    upper = gribmaker.ensemble(members=2, steps=(0, 6, 12), levels=(500, 850), params=(130,))
    surface = []
    for number in (1, 2):
        for step in (0, 6):
            key = dict(REQUEST, levtype="sfc", param="167", step=str(step), number=str(number))
            surface.append((key, gribmaker.make_field(key, seed=100 + number * 10 + step)))
    archive(config, upper + surface)
    ds = xr.open_dataset(REQUEST, engine="fieldstore", config=config)
    assert ds["2t"].dims == ("number", "step", "latitude", "longitude")
    assert ds["t"].dims == ("number", "step", "isobaricInhPa", "latitude", "longitude")
    # 2t has no step 12: NaN there, values elsewhere.
    assert np.isnan(ds["2t"].sel(step=hours(12)).values).all()
    for key, message in surface:
        got = ds["2t"].sel(number=int(key["number"]), step=hours(int(key["step"]))).values
        np.testing.assert_array_equal(got.ravel(), gribmaker.decode(message)["values"])


@pytest.mark.parametrize(
    "grid, dims",
    [("regular_gg", ("latitude", "longitude")), ("polar_stereographic", ("y", "x"))],
)
def test_other_grids(config, grid, dims):
    fields = archive(
        config,
        gribmaker.ensemble(members=2, steps=(0, 6), levels=(500,), params=(130,), grid=grid),
    )
    ds = xr.open_dataset(REQUEST, engine="fieldstore", config=config)
    first = gribmaker.decode(fields[0][1])
    assert ds["t"].dims == ("number", "step") + dims
    shape = ds["t"].shape[2:]
    lats = first["latitudes"].reshape(shape)
    lons = first["longitudes"].reshape(shape)
    if dims == ("latitude", "longitude"):
        np.testing.assert_array_equal(ds["latitude"].values, lats[:, 0])
        np.testing.assert_array_equal(ds["longitude"].values, lons[0, :])
    else:
        np.testing.assert_array_equal(ds["latitude"].values, lats)
        np.testing.assert_array_equal(ds["longitude"].values, lons)
    ds = ds.load()
    for key, message in fields:
        got = ds["t"].sel(number=int(key["number"]), step=hours(int(key["step"]))).values
        np.testing.assert_array_equal(got.ravel(), gribmaker.decode(message)["values"])

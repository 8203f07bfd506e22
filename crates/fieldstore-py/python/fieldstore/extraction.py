"""Extractions as xarray objects: a time series at a place, or the points of an area, with real
coordinates, read without whole fields (`FDB.extract_places`, docs/extraction.md).

    import fieldstore
    from fieldstore import extraction
    fdb = fieldstore.FDB()
    ts = extraction.series(fdb, {"class": "od", ..., "param": "2t", "step": "0/to/240/by/6"}, 51.5, -0.12)
    box = extraction.area(fdb, {...}, (60, -10, 50, 2))   # north, west, south, east
"""

from __future__ import annotations

import datetime as _dt

import numpy as np

__all__ = ["series", "area"]


def _xarray():
    try:
        import xarray
    except ImportError as e:  # pragma: no cover - said plainly to the user
        raise ImportError("fieldstore.extraction needs xarray: pip install xarray") from e
    return xarray


def _varying(fields):
    """Keywords whose values differ between the fields, in key order."""
    keys = [f["key"] for f in fields]
    names = []
    for k in keys[0]:
        if len({str(key.get(k)) for key in keys}) > 1:
            names.append(k)
    return names


def _coord(name, values):
    if name == "step":
        try:
            return np.array([np.timedelta64(int(v), "h") for v in values])
        except ValueError:
            return np.array(values)
    if name == "date":
        try:
            return np.array([np.datetime64(_dt.datetime.strptime(v, "%Y%m%d"), "ns") for v in values])
        except ValueError:
            return np.array(values)
    try:
        return np.array([int(v) for v in values])
    except ValueError:
        return np.array(values)


def _valid_time(key):
    try:
        base = _dt.datetime.strptime(key["date"] + key.get("time", "0000").zfill(4), "%Y%m%d%H%M")
        step = int(str(key.get("step", "0")).split("-")[-1])
    except (KeyError, ValueError):
        return np.datetime64("NaT")
    return np.datetime64(base + _dt.timedelta(hours=step), "ns")


def _cube(fields, selection, point_dim):
    """Values of one selection of every field on a grid of the varying keywords (and the
    selection's points along `point_dim`, if given)."""
    xr = _xarray()
    dims = _varying(fields)
    axes = {d: [] for d in dims}
    for f in fields:
        for d in dims:
            v = f["key"][d]
            if v not in axes[d]:
                axes[d].append(v)
    for d in dims:
        try:
            axes[d].sort(key=lambda v: float(v))
        except ValueError:
            axes[d].sort()
    first = fields[0]["selections"][selection]
    npoints = len(first["values"])
    shape = [len(axes[d]) for d in dims] + ([npoints] if point_dim else [])
    data = np.full(shape, np.nan)
    valid = np.full([len(axes[d]) for d in dims], np.datetime64("NaT"), dtype="datetime64[ns]")
    for f in fields:
        at = tuple(axes[d].index(f["key"][d]) for d in dims)
        values = f["selections"][selection]["values"]
        data[at] = values if point_dim else values[0]
        valid[at] = _valid_time(f["key"])
    coords = {d: _coord(d, axes[d]) for d in dims}
    lat, lon = first["latitudes"], first["longitudes"]
    if point_dim:
        coords["latitude"] = (point_dim, lat)
        coords["longitude"] = (point_dim, lon)
        coords["index"] = (point_dim, first["indices"].astype(np.int64))
    else:
        coords["latitude"] = float(lat[0]) if len(lat) else np.nan
        coords["longitude"] = float(lon[0]) if len(lon) else np.nan
        coords["index"] = int(first["indices"][0])
    if dims:
        coords["valid_time"] = (dims, valid)
    fixed = {k: v for k, v in fields[0]["key"].items() if k not in dims}
    name = fixed.get("param", "values")
    return xr.DataArray(
        data,
        dims=dims + ([point_dim] if point_dim else []),
        coords=coords,
        name=name,
        attrs={"mars_" + k: v for k, v in fixed.items()}
        | {"bytes_read": int(sum(f["bytes_read"] for f in fields))},
    )


def series(fdb, request, lat, lon):
    """The values at the grid point nearest to (lat, lon) of every field the request names, as
    an xarray.DataArray along the keywords that vary (step, date, number...), with the grid
    point's `latitude` and `longitude`, its `index`, and `valid_time`."""
    fields = fdb.extract_places(request, points=[(float(lat), float(lon))])
    if not fields:
        raise LookupError(f"no field matches {request}")
    out = _cube(fields, 0, None)
    out.attrs["requested_latitude"] = float(lat)
    out.attrs["requested_longitude"] = float(lon)
    return out


def area(fdb, request, box):
    """The values of every grid point inside `box` (north, west, south, east, degrees) of every
    field the request names, as an xarray.DataArray along the varying keywords and `point`,
    with each point's `latitude`, `longitude` and `index`."""
    north, west, south, east = (float(v) for v in box)
    fields = fdb.extract_places(request, boxes=[(north, west, south, east)])
    if not fields:
        raise LookupError(f"no field matches {request}")
    out = _cube(fields, 0, "point")
    out.attrs["box"] = (north, west, south, east)
    return out

"""The ``fieldstore`` xarray engine: open a MARS request against a field store as a Dataset.

``xr.open_dataset({"class": "od", ...}, engine="fieldstore", config=...)``. Opening lists the
request (no values are read) and decodes one field per variable for its name, attributes and
geometry; values are fetched when accessed, one retrieve per access, only the fields touched.
Dimension and coordinate names follow cfgrib, so code written for cfgrib datasets keeps working.
See docs/python-xarray.md.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections import OrderedDict

import numpy as np

try:  # xarray is an optional dependency (extra "xarray"); the entry point needs it.
    import xarray as xr
    from xarray.backends import BackendArray, BackendEntrypoint
    from xarray.core import indexing
except ImportError:  # pragma: no cover - only without the extra
    xr = None
    BackendArray = object
    BackendEntrypoint = object
    indexing = None

__all__ = ["FieldstoreBackendEntrypoint", "open_request"]

# levtype -> (dimension name as cfgrib names the typeOfLevel, coordinate attributes).
_LEVEL_DIMS = {
    "pl": (
        "isobaricInhPa",
        {
            "units": "hPa",
            "positive": "down",
            "stored_direction": "decreasing",
            "standard_name": "air_pressure",
            "long_name": "pressure",
        },
    ),
    "ml": (
        "hybrid",
        {
            "units": "1",
            "positive": "down",
            "long_name": "hybrid level",
            "standard_name": "atmosphere_hybrid_sigma_pressure_coordinate",
        },
    ),
    "pt": (
        "theta",
        {
            "units": "K",
            "standard_name": "air_potential_temperature",
            "long_name": "potential temperature",
        },
    ),
    "pv": (
        "potentialVorticity",
        {"units": "10**-6 K m**2 kg**-1 s**-1", "long_name": "potential vorticity"},
    ),
    "sol": ("soilLayer", {"units": "1", "positive": "down", "long_name": "soil layer"}),
    "hl": (
        "heightAboveGround",
        {
            "units": "m",
            "positive": "up",
            "standard_name": "height",
            "long_name": "height above the surface",
        },
    ),
}

_COORD_ATTRS = {
    "latitude": {"units": "degrees_north", "standard_name": "latitude", "long_name": "latitude"},
    "longitude": {"units": "degrees_east", "standard_name": "longitude", "long_name": "longitude"},
    "number": {
        "units": "1",
        "standard_name": "realization",
        "long_name": "ensemble member numerical id",
    },
    "step": {"standard_name": "forecast_period", "long_name": "time since forecast_reference_time"},
    "time": {"standard_name": "forecast_reference_time", "long_name": "initial time of forecast"},
    "valid_time": {"standard_name": "time", "long_name": "time"},
}

# Keys that never become dimensions: they name the variable, or are part of another dimension.
_VARIABLE_KEYS = ("param", "levtype")
_REGULAR_GRIDS = ("regular_ll", "regular_gg")
# Projected grids whose points form an (y, x) array, as cfgrib names them.
_PROJECTED_GRIDS = (
    "lambert",
    "lambert_azimuthal_equal_area",
    "albers",
    "polar_stereographic",
    "mercator",
    "space_view",
)

# GRIB keys copied into every variable's attributes (prefixed GRIB_, as cfgrib does).
_VARIABLE_GRIB_KEYS = (
    "paramId",
    "dataType",
    "numberOfPoints",
    "typeOfLevel",
    "stepUnits",
    "stepType",
    "gridType",
    "Nx",
    "Ny",
    "Ni",
    "Nj",
    "N",
    "latitudeOfFirstGridPointInDegrees",
    "longitudeOfFirstGridPointInDegrees",
    "latitudeOfLastGridPointInDegrees",
    "longitudeOfLastGridPointInDegrees",
    "iDirectionIncrementInDegrees",
    "jDirectionIncrementInDegrees",
    "iScansNegatively",
    "jScansPositively",
    "jPointsAreConsecutive",
    "missingValue",
    "NV",
    "totalNumber",
    "cfName",
    "cfVarName",
    "name",
    "shortName",
    "units",
)
_MISSING = object()


class LayoutError(ValueError):
    """The fields a request lists cannot form one Dataset (narrow the request)."""


# -- parsing canonical key values -------------------------------------------------------------


def _parse_step(value):
    """A step as the store lists it (``6``, ``30m``, ``0-6``, ``12h``) -> nanoseconds.

    A range counts as its end, as cfgrib's ``step`` (``endStep``) does.
    """
    text = str(value).strip()
    if "-" in text:
        text = text.rsplit("-", 1)[1]
    unit = 3600
    suffixes = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if text and text[-1].lower() in suffixes:
        unit = suffixes[text[-1].lower()]
        text = text[:-1]
    try:
        amount = float(text)
    except ValueError as e:
        raise LayoutError(f"step {value!r} is not a step the xarray engine understands") from e
    return np.timedelta64(round(amount * unit * 1_000_000_000), "ns")


def _parse_datetime(date, time):
    """``date=20240101``, ``time=1200`` (or ``12``, ``0``) -> datetime64[ns]."""
    d = str(date).strip()
    t = str(time if time is not None else "0000").strip().replace(":", "")
    if len(d) != 8 or not d.isdigit():
        raise LayoutError(f"date {date!r} is not YYYYMMDD; the xarray engine needs absolute dates")
    if not t.isdigit() or len(t) > 6:
        raise LayoutError(f"time {time!r} is not HHMM")
    if len(t) <= 2:
        t = t.zfill(2) + "00"
    t = t.zfill(4) if len(t) <= 4 else t.zfill(6)
    hh, mm, ss = t[0:2], t[2:4], t[4:6] or "00"
    iso = f"{d[0:4]}-{d[4:6]}-{d[6:8]}T{hh}:{mm}:{ss}"
    return np.datetime64(iso, "ns")


def _number_or_text(values):
    """Coordinate values for keys listed as text: ints if all are, else floats, else text."""
    try:
        as_float = [float(v) for v in values]
    except ValueError:
        return np.array([str(v) for v in values])
    if all(f.is_integer() for f in as_float) and all("." not in str(v) for v in values):
        return np.array([int(f) for f in as_float], dtype=np.int64)
    return np.array(as_float, dtype=np.float64)


def _sort_key_for(values):
    """Order raw values numerically when they all are numbers, else as text."""
    try:
        [float(v) for v in values]
    except ValueError:
        return str
    return float


# -- the layout: which dimensions, which coordinate values, where each field goes --------------


class _Dim:
    """One non-horizontal dimension: its name, the keys that make it, and its sorted values."""

    def __init__(self, name, keys, raws, coord, attrs):
        self.name = name
        self.keys = keys  # tuple of store keys, e.g. ("date", "time") for "time"
        self.raws = raws  # list of tuples of raw values, one per coordinate value
        self.coord = coord  # numpy array of coordinate values
        self.attrs = attrs
        self.position = {raw: i for i, raw in enumerate(raws)}

    def __len__(self):
        return len(self.raws)


class _Variable:
    """The fields of one (param, levtype), and the dimensions they span."""

    def __init__(self, param, levtype):
        self.param = param
        self.levtype = levtype
        self.keys = []  # every listed field key of this variable
        self.dims = []  # _Dim, in dataset order
        self.fixed = {}  # request keys shared by all its fields
        self.present = set()  # tuples of dim positions that exist in the store
        self.name = None
        self.attrs = {}


def _dim_raw(dim, key):
    return tuple(key.get(k, "") for k in dim.keys)


def _build_dims(keys, level_dim_name):
    """Dimensions spanned by a set of field keys, in cfgrib's order (extra keys first)."""
    dims = []
    all_names = set()
    for key in keys:
        all_names.update(key)
    varying = {}
    for name in sorted(all_names):
        if name in _VARIABLE_KEYS:
            continue
        values = {key.get(name) for key in keys}
        varying[name] = values
    standard = {"number", "date", "time", "step", "levelist"}
    for name in sorted(varying):
        if name in standard:
            continue
        values = varying[name]
        if len(values) > 1:
            if None in values:
                raise LayoutError(
                    f"some fields have key {name!r} and others do not; narrow the request"
                )
            raws = sorted(values, key=_sort_key_for(values))
            dims.append(
                _Dim(
                    name,
                    (name,),
                    [(v,) for v in raws],
                    _number_or_text(raws),
                    {"fieldstore_key": name},
                )
            )
    for name in ("number",):
        if name in varying and len(varying[name]) > 1:
            values = varying[name]
            if None in values:
                raise LayoutError(
                    "some fields have an ensemble number and others do not; narrow the request (e.g. type=pf)"
                )
            raws = sorted(values, key=float)
            dims.append(
                _Dim(
                    "number",
                    ("number",),
                    [(v,) for v in raws],
                    _number_or_text(raws),
                    dict(_COORD_ATTRS["number"]),
                )
            )
    pairs = {(key.get("date"), key.get("time")) for key in keys}
    if ("date" in varying or "time" in varying) and len(pairs) > 1:
        stamped = sorted(
            ((_parse_datetime(d, t), (d or "", t or "")) for d, t in pairs), key=lambda p: p[0]
        )
        coord = np.array([s for s, _ in stamped], dtype="datetime64[ns]")
        if len(set(coord.tolist())) != len(coord):
            raise LayoutError("two spellings of the same date and time; narrow the request")
        dims.append(
            _Dim(
                "time", ("date", "time"), [r for _, r in stamped], coord, dict(_COORD_ATTRS["time"])
            )
        )
    if "step" in varying and len(varying["step"]) > 1:
        values = varying["step"]
        if None in values:
            raise LayoutError("some fields have a step and others do not; narrow the request")
        stamped = sorted(((_parse_step(v), v) for v in values), key=lambda p: p[0])
        coord = np.array([s for s, _ in stamped], dtype="timedelta64[ns]")
        dims.append(
            _Dim("step", ("step",), [(r,) for _, r in stamped], coord, dict(_COORD_ATTRS["step"]))
        )
    if "levelist" in varying and len(varying["levelist"]) > 1 and level_dim_name is not None:
        values = varying["levelist"]
        if None in values:
            raise LayoutError("some fields have a level and others do not; narrow the request")
        name, attrs = level_dim_name
        # Pressure decreases upwards: cfgrib stores it decreasing, and so do we.
        raws = sorted(values, key=float, reverse=name == "isobaricInhPa")
        coord = _number_or_text(raws)
        if name in ("isobaricInhPa", "theta", "potentialVorticity"):
            coord = coord.astype(np.float64)
        attrs = dict(attrs, fieldstore_key="levelist")
        dims.append(_Dim(name, ("levelist",), [(v,) for v in raws], coord, attrs))
    return dims


def _level_dim(levtype):
    if levtype in _LEVEL_DIMS:
        return _LEVEL_DIMS[levtype]
    return (f"level_{levtype}" if levtype else "level", {"long_name": f"level ({levtype})"})


class _Layout:
    """What a request lists, arranged as variables over shared dimensions."""

    def __init__(self, keys):
        if not keys:
            raise LayoutError("the request matches no field in the store")
        groups = OrderedDict()
        for key in keys:
            ident = (key.get("param", ""), key.get("levtype", ""))
            groups.setdefault(ident, []).append(key)
        # Built over every field, so that all variables share one coordinate per dimension.
        common = _build_dims(keys, None)
        levels = {}
        for (_, levtype), ks in groups.items():
            if levtype not in levels:
                same = [k for k in keys if k.get("levtype", "") == levtype]
                levels[levtype] = [
                    d for d in _build_dims(same, _level_dim(levtype)) if d.keys == ("levelist",)
                ]
        self.variables = []
        for (param, levtype), ks in groups.items():
            var = _Variable(param, levtype)
            var.keys = ks
            names_here = set()
            for k in ks:
                names_here.update(k)
            dims = [d for d in common + levels[levtype] if set(d.keys) & names_here]
            var.dims = self._ordered(dims)
            dim_keys = {k for d in var.dims for k in d.keys}
            for name in ks[0]:
                if name in dim_keys:
                    continue
                if len({k.get(name) for k in ks}) == 1:
                    var.fixed[name] = ks[0][name]
            for k in ks:
                var.present.add(tuple(d.position[_dim_raw(d, k)] for d in var.dims))
            self.variables.append(var)

    @staticmethod
    def _ordered(dims):
        rank = {"number": 1, "time": 2, "step": 3}

        def order(d):
            if d.name in rank:
                return (rank[d.name], d.name)
            if d.keys == ("levelist",):
                return (4, d.name)
            return (0, d.name)

        return sorted(dims, key=order)


# -- geometry ----------------------------------------------------------------------------------


class _Geometry:
    """Horizontal dimensions and coordinates of a field, from ecCodes."""

    def __init__(self, field):
        grid_type = str(field.metadata("gridType", default="unknown"))
        lats = np.asarray(field.latitudes, dtype=np.float64)
        lons = np.asarray(field.longitudes, dtype=np.float64)
        self.grid_type = grid_type
        self.npoints = lats.size
        self.lats = lats
        self.lons = lons
        self.transpose = False
        ni = _int_or_none(field.metadata("Ni", default=None))
        nj = _int_or_none(field.metadata("Nj", default=None))
        consecutive = _int_or_none(field.metadata("jPointsAreConsecutive", default=0)) or 0
        if grid_type in _REGULAR_GRIDS and ni and nj and ni * nj == self.npoints:
            self.dims = ("latitude", "longitude")
            self.shape = (nj, ni)
            if consecutive:
                self.transpose = True
                grid_lats = lats.reshape(ni, nj).T
                grid_lons = lons.reshape(ni, nj).T
            else:
                grid_lats = lats.reshape(nj, ni)
                grid_lons = lons.reshape(nj, ni)
            self.coords = {
                "latitude": (("latitude",), grid_lats[:, 0], dict(_COORD_ATTRS["latitude"])),
                "longitude": (("longitude",), grid_lons[0, :], dict(_COORD_ATTRS["longitude"])),
            }
            if grid_lats[0, 0] > grid_lats[-1, 0]:
                self.coords["latitude"][2]["stored_direction"] = "decreasing"
            return
        nx = _int_or_none(field.metadata("Nx", default=None))
        ny = _int_or_none(field.metadata("Ny", default=None))
        if (
            grid_type in _PROJECTED_GRIDS
            and nx
            and ny
            and nx * ny == self.npoints
            and not consecutive
        ):
            self.dims = ("y", "x")
            self.shape = (ny, nx)
            self.coords = {
                "latitude": (("y", "x"), lats.reshape(ny, nx), dict(_COORD_ATTRS["latitude"])),
                "longitude": (("y", "x"), lons.reshape(ny, nx), dict(_COORD_ATTRS["longitude"])),
            }
            return
        self.dims = ("values",)
        self.shape = (self.npoints,)
        self.coords = {
            "latitude": (("values",), lats, dict(_COORD_ATTRS["latitude"])),
            "longitude": (("values",), lons, dict(_COORD_ATTRS["longitude"])),
        }

    def same_as(self, other):
        return (
            self.grid_type == other.grid_type
            and self.shape == other.shape
            and np.array_equal(self.lats, other.lats, equal_nan=True)
            and np.array_equal(self.lons, other.lons, equal_nan=True)
        )

    def arrange(self, values):
        """Decoded values (ecCodes order) -> this geometry's shape."""
        if self.transpose:
            return values.reshape(self.shape[1], self.shape[0]).T
        return values.reshape(self.shape)


def _int_or_none(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# -- reading -----------------------------------------------------------------------------------


def _open_fdb(config):
    import fieldstore

    return fieldstore.FDB(config)


def _clean(key):
    """A key as text, without the empty values the store lists for absent optional keys
    (``hdate=``): a request naming them empty would be invalid."""
    return {str(k): str(v) for k, v in dict(key).items() if v is not None and str(v) != ""}


def _list_keys(fdb, request):
    return [_clean(element.key) for element in fdb.list(request, keys=True, level=3)]


def _request_for(fixed, dims, selections):
    """One request covering the outer product of the selected coordinate values."""
    request = {k: v for k, v in fixed.items()}
    for dim, selected in zip(dims, selections):
        for j, name in enumerate(dim.keys):
            values = []
            for i in selected:
                v = dim.raws[i][j]
                if v not in values:
                    values.append(v)
            request[name] = values if len(values) > 1 else values[0]
    return request


class _Source:
    """The store handle a dataset reads from; re-opened after unpickling (dask workers)."""

    def __init__(self, fdb, config):
        self._fdb = fdb
        self._config = config
        self._lock = threading.Lock()

    def fdb(self):
        with self._lock:
            if self._fdb is None:
                self._fdb = _open_fdb(self._config)
            return self._fdb

    def __getstate__(self):
        config = self._config
        if config is None and self._fdb is not None:
            config = getattr(self._fdb, "config", None)
        return {"config": config}

    def __setstate__(self, state):
        self._fdb = None
        self._config = state["config"]
        self._lock = threading.Lock()


class FieldstoreArray(BackendArray):
    """The values of one variable; indexing retrieves only the fields the selection touches."""

    def __init__(self, source, variable, geometry, dtype):
        self.source = source
        self.variable = variable
        self.geometry = geometry
        self.dtype = np.dtype(dtype)
        self.shape = tuple(len(d) for d in variable.dims) + geometry.shape

    def __getitem__(self, key):
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, self._read
        )

    def _read(self, key):
        nfield = len(self.variable.dims)
        field_key, horiz_key = key[:nfield], key[nfield:]
        selections = []
        dropped = []
        for size, k in zip(self.shape[:nfield], field_key):
            selected = np.arange(size)[k]
            dropped.append(np.ndim(selected) == 0)
            selections.append([int(i) for i in np.atleast_1d(selected)])
        horiz_shape = _indexed_shape(self.geometry.shape, horiz_key)
        # np.empty, not np.full: filling a large selection twice costs as much as decoding it.
        out = np.empty([len(s) for s in selections] + list(horiz_shape), dtype=self.dtype)
        wanted = {}
        every = []
        for combo in itertools.product(*[list(enumerate(s)) for s in selections]):
            where = tuple(i for i, _ in combo)
            every.append(where)
            index = tuple(j for _, j in combo)
            if index in self.variable.present:
                wanted[index] = where
        written = self._fill(out, selections, wanted, horiz_key) if wanted else set()
        if len(written) != len(every):
            for where in every:
                if where not in written:
                    out[where] = np.nan
        squeeze = tuple(0 if d else slice(None) for d in dropped)
        return out[squeeze]

    def _fill(self, out, selections, wanted, horiz_key):
        """Retrieve the wanted fields into ``out``; returns the positions written."""
        written = set()
        var = self.variable
        request = _request_for(var.fixed, var.dims, selections)
        fdb = self.source.fdb()
        reader = fdb.retrieve(request)
        try:
            for field in reader:
                key = _clean(field.key)
                if (
                    key.get("param", var.param) != var.param
                    or key.get("levtype", var.levtype) != var.levtype
                ):
                    continue
                try:
                    index = tuple(d.position[_dim_raw(d, key)] for d in var.dims)
                except KeyError:
                    continue
                where = wanted.pop(index, None)
                if where is None:
                    continue
                values = np.asarray(field.to_numpy(), dtype=np.float64)
                if values.size != self.geometry.npoints:
                    raise LayoutError(
                        f"field {key} has {values.size} points, not the {self.geometry.npoints} "
                        f"of the variable's grid; open a request on one grid"
                    )
                out[where] = _apply_outer(self.geometry.arrange(values), horiz_key)
                written.add(where)
        finally:
            close = getattr(reader, "close", None)
            if close is not None:
                close()
        return written


def _indexed_shape(shape, key):
    dims = []
    for size, k in zip(shape, key):
        n = np.arange(size)[k]
        if np.ndim(n):
            dims.append(len(n))
    return tuple(dims)


def _apply_outer(array, key):
    """Orthogonal indexing of a small array, one axis at a time (last first, so axes stay put)."""
    for axis in reversed(range(len(key))):
        k = key[axis]
        if isinstance(k, slice):
            array = array[(slice(None),) * axis + (k,)]
        else:
            array = np.take(array, k, axis=axis)
    return array


# -- opening -----------------------------------------------------------------------------------


def _variable_name(field, param):
    short = field.metadata("shortName", default=None)
    if short in (None, "", "unknown", "~"):
        return f"param_{param}"
    return str(short)


def _variable_attrs(field):
    attrs = {}
    for name in _VARIABLE_GRIB_KEYS:
        value = field.metadata(name, default=_MISSING)
        if value is _MISSING or value is None:
            continue
        if isinstance(value, (np.integer,)):
            value = int(value)
        elif isinstance(value, (np.floating,)):
            value = float(value)
        attrs[f"GRIB_{name}"] = value
    units = attrs.get("GRIB_units")
    if units not in (None, "unknown"):
        attrs["units"] = units
    long_name = attrs.get("GRIB_name")
    if long_name not in (None, "unknown"):
        attrs["long_name"] = long_name
    standard = attrs.get("GRIB_cfName")
    if standard not in (None, "unknown", "~", ""):
        attrs["standard_name"] = standard
    return attrs


def _one_field(fdb, key):
    """Retrieve one field by its full key (for names, attributes and geometry)."""
    reader = fdb.retrieve(dict(key))
    try:
        for field in reader:
            return field
    finally:
        close = getattr(reader, "close", None)
        if close is not None:
            close()
    raise LayoutError(f"field {key} was listed but could not be retrieved (wiped meanwhile?)")


def open_request(request=None, *, config=None, fdb=None, dtype="float64", drop_variables=None):
    """Open a MARS request as an xarray Dataset (what ``engine="fieldstore"`` calls).

    ``fdb`` is an open ``fieldstore.FDB`` (or anything with its ``list``/``retrieve``) to use
    instead of opening one from ``config``.
    """
    if xr is None:  # pragma: no cover
        raise ImportError(
            "the fieldstore xarray engine needs xarray: pip install 'fieldstore[xarray]'"
        )
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"dtype must be a floating point type (float64 or float32), not {dtype}")
    if fdb is None:
        fdb = _open_fdb(config)
    source = _Source(fdb, config)
    layout = _Layout(_list_keys(fdb, request))

    geometry = None
    variables = {}
    drop = set([drop_variables] if isinstance(drop_variables, str) else (drop_variables or ()))
    names = {}
    dataset_attrs = {}
    for var in layout.variables:
        field = _one_field(fdb, var.keys[0])
        if not dataset_attrs:
            for name in ("edition", "centre", "centreDescription", "subCentre"):
                value = field.metadata(name, default=None)
                if value is not None:
                    dataset_attrs[f"GRIB_{name}"] = value
        this = _Geometry(field)
        if geometry is None:
            geometry = this
        elif not geometry.same_as(this):
            raise LayoutError(
                f"param={var.param} levtype={var.levtype} is on grid {this.grid_type} "
                f"({this.npoints} points), other variables on {geometry.grid_type} "
                f"({geometry.npoints} points); open one request per grid"
            )
        var.name = _variable_name(field, var.param)
        var.attrs = _variable_attrs(field)
        names.setdefault(var.name, []).append(var)
    for name, vars_ in names.items():
        if len(vars_) > 1:
            for var in vars_:
                var.name = f"{name}_{var.levtype}"

    coords = {}
    used_dims = {}
    for var in layout.variables:
        if var.name in drop:
            continue
        array = FieldstoreArray(source, var, geometry, dtype)
        data = indexing.LazilyIndexedArray(array)
        dims = tuple(d.name for d in var.dims) + geometry.dims
        attrs = dict(var.attrs)
        attrs["GRIB_levtype"] = var.levtype
        encoding = {"dtype": dtype, "fieldstore_request": {k: v for k, v in var.fixed.items()}}
        variables[var.name] = xr.Variable(dims, data, attrs, encoding)
        for d in var.dims:
            used_dims[d.name] = d
        # Scalar coordinates (cfgrib's squeezed dims) for single-valued standard keys.
        for key, coord in _scalar_coords(var).items():
            coords.setdefault(key, coord)

    for name, d in used_dims.items():
        coords[name] = xr.Variable((name,), d.coord, d.attrs)
    for name, (dims, values, attrs) in geometry.coords.items():
        coords[name] = xr.Variable(dims, values, attrs)
    valid = _valid_time(coords)
    if valid is not None:
        coords["valid_time"] = valid

    attrs = dict(dataset_attrs)
    if "GRIB_centreDescription" in attrs:
        attrs["institution"] = attrs["GRIB_centreDescription"]
    attrs.update(
        {
            "Conventions": "CF-1.7",
            "history": "opened by the fieldstore xarray engine",
            "fieldstore_request": request if isinstance(request, str) else repr(request),
        }
    )
    ds = xr.Dataset(variables, coords=coords, attrs=attrs)
    ds.encoding["source"] = request if isinstance(request, str) else repr(request)
    return ds


def _scalar_coords(var):
    """Coordinates of keys that have one value only (cfgrib keeps them as 0-d coordinates)."""
    coords = {}
    fixed = var.fixed
    if "number" in fixed:
        coords["number"] = xr.Variable(
            (), np.int64(int(fixed["number"])), dict(_COORD_ATTRS["number"])
        )
    if "date" in fixed:
        coords["time"] = xr.Variable(
            (), _parse_datetime(fixed["date"], fixed.get("time")), dict(_COORD_ATTRS["time"])
        )
    if "step" in fixed:
        coords["step"] = xr.Variable((), _parse_step(fixed["step"]), dict(_COORD_ATTRS["step"]))
    if "levelist" in fixed:
        name, attrs = _level_dim(var.levtype)
        value = _number_or_text([fixed["levelist"]])[0]
        if name in ("isobaricInhPa", "theta", "potentialVorticity"):
            value = np.float64(value)
        coords[name] = xr.Variable((), value, dict(attrs, fieldstore_key="levelist"))
    return coords


def _valid_time(coords):
    """valid_time = time + step, over whichever of the two are dimensions."""
    time = coords.get("time")
    step = coords.get("step")
    if time is None or step is None:
        return None
    t = time.values
    s = step.values
    dims = tuple(time.dims) + tuple(step.dims)
    if time.dims and step.dims:
        values = t[:, None] + s[None, :]
    else:
        values = t + s
    return xr.Variable(
        dims, np.asarray(values, dtype="datetime64[ns]"), dict(_COORD_ATTRS["valid_time"])
    )


class FieldstoreBackendEntrypoint(BackendEntrypoint):
    """``engine="fieldstore"``: a MARS request (dict or string) against a field store."""

    description = "Open a MARS request against a fieldstore (FDB) as a Dataset, lazily"
    url = "https://github.com/fieldstore/fieldstore/blob/main/docs/python-xarray.md"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "config", "fdb", "dtype")

    def open_dataset(
        self, filename_or_obj, *, drop_variables=None, config=None, fdb=None, dtype="float64"
    ):
        request = filename_or_obj
        if isinstance(request, os.PathLike):
            raise TypeError("engine='fieldstore' opens a MARS request (dict or string), not a path")
        return open_request(
            request, config=config, fdb=fdb, dtype=dtype, drop_variables=drop_variables
        )

    def guess_can_open(self, filename_or_obj):
        # Only when asked by name: a dict or a string may mean many things to other engines.
        return False

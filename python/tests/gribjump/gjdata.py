"""The data set of the GribJump comparison tests, made with the eccodes package (importable from
both the test virtualenv and the reference one, target/py-venv-gribjump).

Surface forecasts (class rd, expver xxxx) on a regular lat-lon grid, one date, 4 steps, 4
parameters, each a packing: 167 (2t) simple, 165 (10u) CCSDS, 166 (10v) simple with a bitmap,
228 (tp) CCSDS with a bitmap (the masked points: north of 60N and a band of longitudes, different
per step so a time series crosses missing points).
"""

SCHEMA = """\
param:      Param;
step:       Step;
date:       Date;
levelist:   Double;
expver:     Expver;
time:       Time;

[ class, expver, stream, date, time, domain?
       [ type, levtype
               [ step, levelist?, param ]]
]
"""

BASE = {
    "class": "rd",
    "expver": "xxxx",
    "stream": "oper",
    "date": "20240101",
    "time": "0000",
    "domain": "g",
    "type": "fc",
    "levtype": "sfc",
}
STEPS = [0, 6, 12, 18]
# paramId -> (packing, bitmap)
PARAMS = {
    167: ("grid_simple", False),
    165: ("grid_ccsds", False),
    166: ("grid_simple", True),
    228: ("grid_ccsds", True),
}
MISSING = 9999.0


def grid_size(resolution):
    ni = int(round(360 / resolution))
    nj = int(round(180 / resolution)) + 1
    return ni, nj


def make_message(param, step, resolution=1.0, bits=16, date=None):
    """One GRIB2 field; values vary smoothly with latitude, longitude, step and param."""
    import eccodes as ec
    import numpy as np

    packing, bitmap = PARAMS[param]
    ni, nj = grid_size(resolution)
    gid = ec.codes_grib_new_from_samples("regular_ll_sfc_grib2")
    try:
        ec.codes_set(gid, "setLocalDefinition", 1)
        ec.codes_set(gid, "localDefinitionNumber", 1)
        for k in ("class", "type", "stream", "expver"):
            ec.codes_set_string(gid, k, BASE[k])
        ec.codes_set(gid, "date", int(date or BASE["date"]))
        ec.codes_set(gid, "time", int(BASE["time"]))
        ec.codes_set(gid, "step", step)
        ec.codes_set(gid, "paramId", param)
        ec.codes_set(gid, "Ni", ni)
        ec.codes_set(gid, "Nj", nj)
        ec.codes_set(gid, "latitudeOfFirstGridPointInDegrees", 90.0)
        ec.codes_set(gid, "longitudeOfFirstGridPointInDegrees", 0.0)
        ec.codes_set(gid, "latitudeOfLastGridPointInDegrees", -90.0)
        ec.codes_set(gid, "longitudeOfLastGridPointInDegrees", 360.0 - resolution)
        ec.codes_set(gid, "iDirectionIncrementInDegrees", resolution)
        ec.codes_set(gid, "jDirectionIncrementInDegrees", resolution)
        lat = np.repeat(np.linspace(90.0, -90.0, nj), ni)
        lon = np.tile(np.arange(ni) * resolution, nj)
        values = (
            273.15
            + 30.0 * np.cos(np.radians(lat))
            + 5.0 * np.sin(np.radians(lon) * 3 + step / 6.0)
            + (param % 7)
            + 0.25 * step
        )
        if bitmap:
            ec.codes_set(gid, "bitmapPresent", 1)
            ec.codes_set(gid, "missingValue", MISSING)
            band = (lon >= 10.0 + 2 * step) & (lon < 40.0 + 2 * step)
            values = np.where((lat > 60.0) | band, MISSING, values)
        ec.codes_set(gid, "bitsPerValue", bits)
        if packing != "grid_simple":
            ec.codes_set_string(gid, "packingType", packing)
        ec.codes_set_values(gid, values)
        assert ec.codes_get_string(gid, "packingType") == packing
        return ec.codes_get_message(gid)
    finally:
        ec.codes_release(gid)


def make_messages(resolution=1.0, params=None, steps=None, date=None):
    """[(key dict, bytes)] in (param, step) order."""
    out = []
    for param in params or PARAMS:
        for step in steps or STEPS:
            key = dict(BASE, step=str(step), param=str(param))
            if date:
                key["date"] = str(date)
            out.append((key, make_message(param, step, resolution, date=date)))
    return out


def offsets(messages):
    """Each message's offset in the concatenation of ``messages`` ([(key, bytes)])."""
    out, at = [], 0
    for _, data in messages:
        out.append(at)
        at += len(data)
    return out


def md5_grid_section(message):
    import eccodes as ec

    gid = ec.codes_new_from_message(message)
    try:
        return ec.codes_get_string(gid, "md5GridSection")
    finally:
        ec.codes_release(gid)


def nearest_index(lat, lon, resolution=1.0):
    """The grid-point index nearest (lat, lon) on the grids above."""
    ni, _ = grid_size(resolution)
    j = int(round((90.0 - lat) / resolution))
    i = int(round((lon % 360.0) / resolution)) % ni
    return j * ni + i


def fdb5_home(base):
    """An FDB5 home (etc/fdb/config.yaml, schema) with a toc root, for the reference; its path."""
    import os

    home = os.path.join(base, "fdb5-home")
    root = os.path.join(base, "fdb5-root")
    os.makedirs(os.path.join(home, "etc", "fdb"), exist_ok=True)
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(home, "etc", "fdb", "schema"), "w") as f:
        f.write(SCHEMA)
    with open(os.path.join(home, "etc", "fdb", "config.yaml"), "w") as f:
        f.write(
            "type: local\nengine: toc\nschema: %s\nspaces:\n- handler: Default\n  roots:\n  - path: %s\n"
            % (os.path.join(home, "etc", "fdb", "schema"), root)
        )
    return home


__all__ = ["SCHEMA", "BASE", "STEPS", "PARAMS", "make_message", "make_messages", "offsets",
           "md5_grid_section", "nearest_index", "fdb5_home"]

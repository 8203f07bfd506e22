"""GRIB fields for the xarray and earthkit tests, made with the ecCodes python package.

Independent of fieldstore on purpose: the tests compare what fieldstore gives with what ecCodes
decodes from these same bytes.
"""

import itertools

import numpy as np

eccodes = __import__("eccodes")

SAMPLES = {
    "regular_ll": "GRIB2",
    "reduced_gg": "reduced_gg_pl_32_grib2",
    "regular_gg": "regular_gg_pl_grib2",
    "polar_stereographic": "polar_stereographic_pl_grib2",
}


def make_field(keys, grid="regular_ll", seed=0):
    """One GRIB2 message carrying the MARS ``keys`` on ``grid``, pseudo-random values."""
    h = eccodes.codes_grib_new_from_samples(SAMPLES[grid])
    try:
        eccodes.codes_set(h, "setLocalDefinition", 1)
        eccodes.codes_set(h, "localDefinitionNumber", 1)
        if "number" in keys:
            eccodes.codes_set(h, "productDefinitionTemplateNumber", 1)
        if grid == "regular_ll":
            # 24 x 13 points, 15 degrees apart: small, and every latitude/longitude exact.
            for k, v in [
                ("Ni", 24),
                ("Nj", 13),
                ("latitudeOfFirstGridPointInDegrees", 90.0),
                ("longitudeOfFirstGridPointInDegrees", 0.0),
                ("latitudeOfLastGridPointInDegrees", -90.0),
                ("longitudeOfLastGridPointInDegrees", 345.0),
                ("iDirectionIncrementInDegrees", 15.0),
                ("jDirectionIncrementInDegrees", 15.0),
            ]:
                eccodes.codes_set(h, k, v)
        eccodes.codes_set(h, "bitsPerValue", 16)
        for k, v in keys.items():
            if k in ("date", "time", "step", "number"):
                eccodes.codes_set(h, k, int(v))
            elif k == "param":
                eccodes.codes_set(h, "paramId", int(v))
            elif k == "levelist":
                eccodes.codes_set(h, "level", int(v))
            elif k == "levtype":
                if v == "sfc":
                    eccodes.codes_set(h, "typeOfFirstFixedSurface", 1)
                elif v == "ml":
                    eccodes.codes_set(h, "typeOfFirstFixedSurface", 105)
                elif v == "pl":
                    eccodes.codes_set(h, "typeOfLevel", "isobaricInhPa")
                else:
                    eccodes.codes_set(h, "levtype", v)
            elif k == "domain":
                continue
            else:
                eccodes.codes_set(h, k, str(v))
        n = 24 * 13 if grid == "regular_ll" else eccodes.codes_get(h, "numberOfDataPoints")
        rng = np.random.default_rng(seed)
        eccodes.codes_set_values(h, 200.0 + 100.0 * rng.random(n))
        return eccodes.codes_get_message(h)
    finally:
        eccodes.codes_release(h)


def ensemble(
    members=6,
    steps=(0, 6, 12),
    levels=(500, 850),
    params=(130, 131),
    grid="regular_ll",
    date="20261122",
    time="1200",
):
    """An ensemble forecast: a list of (key dict, GRIB bytes)."""
    out = []
    for i, (number, step, level, param) in enumerate(
        itertools.product(range(1, members + 1), steps, levels, params)
    ):
        key = {
            "class": "od",
            "expver": "0001",
            "stream": "enfo",
            "date": date,
            "time": time,
            "type": "pf",
            "levtype": "pl",
            "levelist": str(level),
            "param": str(param),
            "step": str(step),
            "number": str(number),
        }
        out.append((key, make_field(key, grid=grid, seed=i)))
    return out


def decode(message):
    """What ecCodes itself decodes from a message: values, latitudes, longitudes, and a few keys."""
    h = eccodes.codes_new_from_message(message)
    try:
        out = {
            "values": eccodes.codes_get_values(h),
            "latitudes": eccodes.codes_get_array(h, "latitudes"),
            "longitudes": eccodes.codes_get_array(h, "longitudes"),
        }
        for k in ("shortName", "units", "name", "paramId", "gridType", "Ni", "Nj"):
            try:
                out[k] = eccodes.codes_get(h, k)
            except eccodes.KeyValueNotFoundError:
                out[k] = None
        return out
    finally:
        eccodes.codes_release(h)

"""Hourly 2 m temperature on a regular lat-lon grid as GRIB2, for bench/pipelines.sh.

Usage: python gen.py LIBECCODES OUT.grib DAYS NI NJ

Steps 1..DAYS*24 of a run at 2025-01-01 00 UTC (so the month of January is complete at 31 days),
paramId 167, levtype sfc, class od/stream oper/type fc/expver 0001, simple packing at 16 bits per
value (as ECMWF archives 2t). Values vary with latitude, longitude, hour and day, plus a
deterministic per-point pattern, so no two steps or points are alike. Encoded through ecCodes'
C API (ctypes) with numpy computing the values.
"""

import ctypes
import math
import sys

import numpy as np


def main():
    lib, out, days, ni, nj = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    ec = ctypes.CDLL(lib)
    ec.codes_grib_handle_new_from_samples.restype = ctypes.c_void_p
    ec.codes_grib_handle_new_from_samples.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    ec.codes_set_long.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_long]
    ec.codes_set_double.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_double]
    ec.codes_set_string.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t)]
    ec.codes_set_double_array.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
    ec.codes_get_message.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)]

    def check(rc, what):
        if rc != 0:
            sys.exit("ecCodes: %s failed (%d)" % (what, rc))

    h = ec.codes_grib_handle_new_from_samples(None, b"regular_ll_sfc_grib2")
    if not h:
        sys.exit("ecCodes: no sample regular_ll_sfc_grib2")

    def setl(k, v):
        check(ec.codes_set_long(h, k.encode(), v), "set %s=%s" % (k, v))

    def setd(k, v):
        check(ec.codes_set_double(h, k.encode(), v), "set %s=%s" % (k, v))

    def sets(k, v):
        n = ctypes.c_size_t(len(v))
        check(ec.codes_set_string(h, k.encode(), v.encode(), ctypes.byref(n)), "set %s=%s" % (k, v))

    setl("centre", 98)
    setl("setLocalDefinition", 1)
    setl("localDefinitionNumber", 1)
    sets("class", "od")
    sets("stream", "oper")
    sets("type", "fc")
    sets("expver", "0001")
    setl("date", 20250101)
    setl("time", 0)
    setl("paramId", 167)
    dx = 360.0 / ni
    dy = 180.0 / (nj - 1)
    setl("Ni", ni)
    setl("Nj", nj)
    setd("latitudeOfFirstGridPointInDegrees", 90.0)
    setd("longitudeOfFirstGridPointInDegrees", 0.0)
    setd("latitudeOfLastGridPointInDegrees", -90.0)
    setd("longitudeOfLastGridPointInDegrees", 360.0 - dx)
    setd("iDirectionIncrementInDegrees", dx)
    setd("jDirectionIncrementInDegrees", dy)
    sets("packingType", "grid_simple")
    setl("bitsPerValue", 16)

    lat = np.radians(np.linspace(90.0, -90.0, nj))[:, None]
    lon = np.radians(np.arange(ni) * dx)[None, :]
    base = 288.0 - 45.0 * np.sin(lat) ** 2 + 3.0 * np.sin(3.0 * lon) * np.cos(lat)
    idx = np.arange(ni * nj, dtype=np.float64).reshape(nj, ni)
    with open(out, "wb") as f:
        for step in range(1, days * 24 + 1):
            hour = step % 24
            day = step / 24.0
            v = (base
                 + 8.0 * np.cos(lat) * np.cos(lon + 2.0 * math.pi * hour / 24.0)
                 + 4.0 * np.sin(2.0 * math.pi * day / 31.0)
                 + 0.5 * np.sin(idx * 0.0137 + step * 0.71))
            v = np.ascontiguousarray(v.ravel(), dtype=np.float64)
            setl("step", step)
            check(ec.codes_set_double_array(h, b"values", v.ctypes.data, v.size), "set values")
            p = ctypes.c_void_p()
            n = ctypes.c_size_t()
            check(ec.codes_get_message(h, ctypes.byref(p), ctypes.byref(n)), "get message")
            f.write(ctypes.string_at(p, n.value))
            if step % 48 == 0:
                print("  %d of %d steps" % (step, days * 24), file=sys.stderr)


if __name__ == "__main__":
    main()

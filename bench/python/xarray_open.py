#!/usr/bin/env python3
"""xr.open_dataset on a 50-member ensemble: engine="fieldstore" against cfgrib on the same GRIB.

Usage (in a venv with fieldstore, xarray, cfgrib and eccodes installed):
    python bench/python/xarray_open.py [--members 50] [--steps 10] [--grid reduced_gg] [--repeat 5]

Prints the median of --repeat runs for: opening (fieldstore; cfgrib without an index file, as a
first open; cfgrib with its index file already written, as a reopen) and loading every value.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
import xarray as xr

sys.path.insert(
    0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "python", "tests", "xarray")
)
import gribmaker  # noqa: E402

import fieldstore  # noqa: E402


def timed(fn, repeat):
    times = []
    result = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--members", type=int, default=50)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--grid", default="reduced_gg", choices=sorted(gribmaker.SAMPLES))
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()

    work = tempfile.mkdtemp(prefix="xarray-open-")
    try:
        steps = tuple(range(0, 6 * args.steps, 6))
        fields = gribmaker.ensemble(
            members=args.members, steps=steps, levels=(500, 850), params=(130, 131), grid=args.grid
        )
        data = b"".join(m for _, m in fields)
        path = os.path.join(work, "ens.grib")
        with open(path, "wb") as f:
            f.write(data)
        root = os.path.join(work, "root")
        os.mkdir(root)
        config = {"type": "local", "engine": "toc", "spaces": [{"roots": [{"path": root}]}]}
        with fieldstore.FDB(config) as fdb:
            fdb.archive(data)
        request = {
            "class": "od",
            "expver": "0001",
            "stream": "enfo",
            "date": "20261122",
            "time": "1200",
            "type": "pf",
        }
        print(
            f"{len(fields)} fields ({args.members} members x {len(steps)} steps x 2 levels x 2 params), "
            f"grid {args.grid}, {len(data) / 1e6:.1f} MB; median of {args.repeat}"
        )

        fdb = fieldstore.FDB(config)
        t_fs, ds_fs = timed(
            lambda: xr.open_dataset(request, engine="fieldstore", fdb=fdb), args.repeat
        )
        t_cf, ds_cf = timed(
            lambda: xr.open_dataset(path, engine="cfgrib", backend_kwargs={"indexpath": ""}),
            args.repeat,
        )
        idx = os.path.join(work, "ens.grib.{short_hash}.idx")
        xr.open_dataset(path, engine="cfgrib", backend_kwargs={"indexpath": idx}).close()
        t_cfi, _ = timed(
            lambda: xr.open_dataset(path, engine="cfgrib", backend_kwargs={"indexpath": idx}),
            args.repeat,
        )
        print(f"open  fieldstore            {t_fs * 1e3:9.1f} ms")
        print(f"open  cfgrib (no index)     {t_cf * 1e3:9.1f} ms   ratio {t_cf / t_fs:5.1f}x")
        print(f"open  cfgrib (index cached) {t_cfi * 1e3:9.1f} ms   ratio {t_cfi / t_fs:5.1f}x")

        l_fs, loaded_fs = timed(
            lambda: xr.open_dataset(request, engine="fieldstore", fdb=fdb).load(), args.repeat
        )
        l_cf, loaded_cf = timed(
            lambda: xr.open_dataset(path, engine="cfgrib", backend_kwargs={"indexpath": ""}).load(),
            args.repeat,
        )
        print(f"open+load fieldstore        {l_fs * 1e3:9.1f} ms")
        print(f"open+load cfgrib (no index) {l_cf * 1e3:9.1f} ms   ratio {l_cf / l_fs:5.1f}x")
        same = np.array_equal(loaded_fs["t"].values.astype(np.float32), loaded_cf["t"].values)
        print(f"values equal (as float32): {same}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

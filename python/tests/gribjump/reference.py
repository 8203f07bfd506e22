"""The calls the GribJump comparison tests make, the same for both sides: run as a script in
target/py-venv-gribjump (ECMWF's pygribjump, gribjumplib, pyfdb, polytope-python, polytope-mars),
and imported by the tests (fieldstore's `pygribjump`), so the two never share a process.

    python reference.py archive GRIB_FILE                 (pyfdb with GribJump's archive plugin)
    python reference.py cases SPEC_JSON OUT_JSON          (run_cases)
    python reference.py polytope SPEC_JSON OUT_JSON       (polytope-mars -> CoverageJSON)
    python reference.py earthkit SPEC_JSON OUT_JSON       (earthkit-data's gribjump source)

Output goes to a file: GribJump prints to stdout.
"""

import json
import math
import os
import sys


def _plain(result):
    return {
        "values": [[None if math.isnan(x) else float(x) for x in v] for v in result.values],
        "masks": [[int(w) for w in m] for m in result.masks],
        "values_flat": len(result.values_flat),
        "masks_flat": len(result.masks_flat),
    }


def run_case(gj, case):
    """One call, as a JSON-able result; an exception is a result too ({"error": ..., "message": ...})."""
    import pygribjump as pygj

    kind = case["kind"]
    try:
        if kind == "requests":
            if case.get("tuples"):
                reqs = [(r, [tuple(x) for x in ranges], h) for r, ranges, h in case["requests"]]
            else:
                reqs = [pygj.ExtractionRequest(r, [tuple(x) for x in ranges], h)
                        for r, ranges, h in case["requests"]]
            results = gj.extract(reqs, {"origin": "fieldstore-tests"})
        elif kind == "paths":
            reqs = [pygj.PathExtractionRequest(p, "file", off, "", 0, [tuple(x) for x in ranges], h)
                    for p, off, ranges, h in case["paths"]]
            results = gj.extract_from_paths(reqs)
        elif kind == "single":
            results = gj.extract_single(case["request"], [tuple(x) for x in case["ranges"]], case.get("hash"))
        elif kind == "axes":
            axes = gj.axes(case["request"], level=case.get("level", 3))
            # Whole: GribJump keeps FDB5's '' for an optional keyword the fields lack.
            return {k: sorted(v) for k, v in axes.items()}
        else:
            raise ValueError(f"unknown case kind {kind}")
        return [_plain(r) for r in results]
    except Exception as exc:
        return {"error": type(exc).__name__, "message": str(exc)}


def run_cases(spec, gj=None):
    """``{name: case}`` -> ``{name: result}`` with one GribJump client (``GribJump()`` unless given)."""
    import pygribjump as pygj

    gj = gj if gj is not None else pygj.GribJump()
    return {name: run_case(gj, case) for name, case in spec.items()}


def archive(grib_file):
    import pygribjump  # noqa: F401  (loading libgribjump registers the FDB archive plugin)
    import pyfdb

    fdb = pyfdb.FDB()
    with open(grib_file, "rb") as f:
        fdb.archive(f.read())
    fdb.flush()


def polytope(spec):
    from polytope_mars.api import PolytopeMars

    return PolytopeMars(spec["config"]).extract(spec["request"])


def earthkit(spec):
    import earthkit.data as ekd

    ds = ekd.from_source("gribjump", spec["request"], ranges=[tuple(r) for r in spec["ranges"]])
    if hasattr(ds, "to_fieldlist"):  # earthkit-data >= 1.3 wraps sources
        ds = ds.to_fieldlist()
    out = []
    for i in range(len(ds)):
        v = ds[i].to_numpy()
        out.append([None if math.isnan(x) else float(x) for x in v.ravel()])
    return out


def main():
    cmd = sys.argv[1]
    if cmd == "archive":
        archive(sys.argv[2])
        out = None
    else:
        with open(sys.argv[2]) as f:
            spec = json.load(f)
        if cmd == "cases":
            out = run_cases(spec)
        elif cmd == "polytope":
            out = polytope(spec)
        elif cmd == "earthkit":
            out = earthkit(spec)
        else:
            raise SystemExit(f"unknown command {cmd}")
        with open(sys.argv[3], "w") as f:
            f.write(out if isinstance(out, str) else json.dumps(out))
    # GribJump's libraries can crash while the interpreter tears down ("double free"): the
    # work is done and written, so leave without the teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

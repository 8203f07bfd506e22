"""The Python side of bench/extract.sh (issue 30): one point over STEPS steps of 0.1° fields, and a
box of 10,000 points, by GribJump's API, against a retrieve plus a full ecCodes decode.

Run once with ECMWF's stack (target/py-venv-gribjump: pygribjump + gribjumplib on FDB5 with the
GribJump archive plugin; the baseline is pyfdb's retrieve + ecCodes) and once with fieldstore's
(its `pygribjump` and `fieldstore.FDB.extract` on a fieldstore store; the baseline is
fieldstore.FDB.retrieve + the same ecCodes decode). The two never share a process.

    python bench.py gen DIR STEPS          the GRIB file DIR/data.grib and DIR/meta.json
    python bench.py run SIDE META OUT R [METHODS]
                                           SIDE ref|ours; R timed calls per method after one
                                           untimed warm-up; the median per call; METHODS a comma
                                           list of gj,fs,decode (default: all the side has)

Each call covers all STEPS fields of one packing: GribJump's `extract` with one
ExtractionRequest per field (the grid hash given, as Polytope does), ranges [(i, i+1)] for the
point and 100 ranges of 100 points (a 100 x 100 box, 10,000 points) for the box. Values are
checked between methods and sides by an md5 of the float64 values (NaN where missing).
"""

import hashlib
import json
import os
import statistics
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "tests", "gribjump"))

import gjdata  # noqa: E402

RES = 0.1
PACKINGS = {"simple": 167, "ccsds": 165}   # 16 bits per value, no bitmap (gjdata.PARAMS)
DATE = "20240102"
POINT = (51.5, -0.12)                      # -> the nearest grid point
BOX_NORTH, BOX_WEST, BOX_SIDE = 50.0, 0.0, 100   # 100 x 100 points from (50N, 0E), 0.1° apart


def request(param, step):
    return dict(gjdata.BASE, date=DATE, step=str(step), param=str(param))


def gen(out_dir, steps):
    import eccodes  # noqa: F401

    os.makedirs(out_dir, exist_ok=True)
    total = {}
    tmp = os.path.join(out_dir, "data.grib.part")
    with open(tmp, "wb") as f:
        for name, param in PACKINGS.items():
            total[name] = 0
            for step in range(steps):
                m = gjdata.make_message(param, step, RES, bits=16, date=DATE)
                total[name] += len(m)
                f.write(m)
                if step == 0:
                    first = m
            print(f"  made {steps} {name} fields, {total[name] / 1e6:.0f} MB", file=sys.stderr)
    os.rename(tmp, os.path.join(out_dir, "data.grib"))
    ni, nj = gjdata.grid_size(RES)
    j0 = int(round((90.0 - BOX_NORTH) / RES))
    i0 = int(round(BOX_WEST / RES))
    meta = {
        "steps": steps,
        "points_per_field": ni * nj,
        "hash": gjdata.md5_grid_section(first),
        "point": list(POINT),
        "point_index": gjdata.nearest_index(POINT[0], POINT[1], RES),
        "box": [[(j0 + j) * ni + i0, (j0 + j) * ni + i0 + BOX_SIDE] for j in range(BOX_SIDE)],
        "box_degrees": [BOX_NORTH, BOX_WEST, BOX_NORTH - (BOX_SIDE - 1) * RES, BOX_WEST + (BOX_SIDE - 1) * RES],
        "bytes": total,
        "packings": PACKINGS,
    }
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def digest(arrays):
    import numpy as np

    h = hashlib.md5()
    n = 0
    for a in arrays:
        a = np.ascontiguousarray(np.asarray(a, dtype="<f8"))
        n += a.size
        h.update(a.tobytes())
    return f"{h.hexdigest()}/{n}"


def split_grib(buf):
    """The messages of a concatenation of GRIB editions 1 and 2."""
    out, at = [], 0
    mv = memoryview(buf)
    while at < len(buf):
        at = buf.find(b"GRIB", at)
        if at < 0:
            break
        ed = buf[at + 7]
        if ed == 2:
            n = struct.unpack(">Q", buf[at + 8:at + 16])[0]
        else:
            n = int.from_bytes(buf[at + 4:at + 7], "big")
        out.append(mv[at:at + n])
        at += n
    return out


def decode_all(buf):
    """ecCodes' full decode of every message: [(step, values)]."""
    import eccodes as ec

    out = []
    for m in split_grib(buf):
        gid = ec.codes_new_from_message(bytes(m))
        try:
            out.append((ec.codes_get_long(gid, "step"), ec.codes_get_values(gid)))
        finally:
            ec.codes_release(gid)
    return out


def timeit(fn, repeats):
    result = fn()                      # warm-up, and the values checked
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return result, {"median": statistics.median(times), "min": min(times), "max": max(times), "n": repeats}


def run(side, meta_file, out_file, repeats, methods):
    import numpy as np
    import pygribjump as pygj

    with open(meta_file) as f:
        meta = json.load(f)
    steps = range(meta["steps"])
    pi = meta["point_index"]
    point_ranges = [(pi, pi + 1)]
    box_ranges = [tuple(r) for r in meta["box"]]
    gh = meta["hash"]
    gj = pygj.GribJump()
    results = {"side": side, "library": getattr(pygj, "library_version", lambda: "?")(), "runs": {}}

    def record(method, packing, what, value_fn, repeats_here):
        vals, t = timeit(value_fn, repeats_here)
        entry = {"time": t, "digest": digest(vals)}
        if what == "point":
            entry["values"] = [None if np.isnan(x) else float(x) for v in vals for x in np.ravel(v)]
        results["runs"].setdefault(method, {}).setdefault(packing, {})[what] = entry
        print(f"  {side} {method} {packing} {what}: {t['median'] * 1000:.2f} ms/call", file=sys.stderr)

    for packing, param in meta["packings"].items():
        reqs = [request(param, s) for s in steps]
        if "gj" in methods:
            for what, ranges in (("point", point_ranges), ("box", box_ranges)):
                def gj_call(ranges=ranges):
                    ers = [pygj.ExtractionRequest(r, ranges, gh) for r in reqs]
                    return [np.concatenate(list(res.values)) if len(res.values) > 1 else res.values[0]
                            for res in gj.extract(ers)]
                record("gj", packing, what, gj_call, repeats)
        if "fs" in methods and side == "ours":
            import fieldstore

            fdb = fieldstore.FDB()
            one = dict(reqs[0], step="/".join(str(s) for s in steps))
            results.setdefault("bytes_read", {})[packing] = {}
            for what, ranges in (("point", point_ranges), ("box", box_ranges)):
                def fs_call(ranges=ranges):
                    ex = fdb.extract(one, list(ranges))
                    return [np.concatenate(e.values) for e in ex]
                record("fs", packing, what, fs_call, repeats)
                results["bytes_read"][packing][what] = sum(e.bytes_read or 0 for e in fdb.extract(one, list(ranges)))
        if "decode" in methods:
            many = dict(reqs[0], step=[str(s) for s in steps])
            if side == "ref":
                import pyfdb

                fdb5 = pyfdb.FDB()

                def retrieve():
                    with fdb5.retrieve(many) as h:
                        return h.read()
            else:
                import fieldstore

                fsdb = fieldstore.FDB()
                many_fs = dict(reqs[0], step="/".join(str(s) for s in steps))

                def retrieve():
                    return fsdb.retrieve(many_fs).read()

            def decode_call():
                fields = sorted(decode_all(retrieve()), key=lambda x: x[0])
                assert len(fields) == len(steps), f"retrieved {len(fields)} fields of {len(steps)}"
                return [(v[pi:pi + 1], np.concatenate([v[a:b] for a, b in box_ranges])) for _, v in fields]

            # one decode gives both the point and the box: timed once, checked for both
            vals, t = timeit(decode_call, max(1, min(repeats, 3)))
            for what, k in (("point", 0), ("box", 1)):
                entry = {"time": t, "digest": digest([v[k] for v in vals])}
                if what == "point":
                    entry["values"] = [float(v[0][0]) for v in vals]
                results["runs"].setdefault("decode", {}).setdefault(packing, {})[what] = entry
            print(f"  {side} decode {packing}: {t['median'] * 1000:.1f} ms/call", file=sys.stderr)

    with open(out_file, "w") as f:
        json.dump(results, f, indent=1)


def main():
    if sys.argv[1] == "gen":
        gen(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "run":
        methods = sys.argv[6].split(",") if len(sys.argv) > 6 else ["gj", "fs", "decode"]
        run(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), methods)
    else:
        raise SystemExit(__doc__)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)   # GribJump's libraries can crash in the interpreter's teardown


if __name__ == "__main__":
    main()

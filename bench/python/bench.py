"""In-process driver for bench/python/pyfdb-compare.sh: one workload, one system, one process.

Run with the interpreter of the system measured (pyfdb's venv or fieldstore's), so both sides run
the very same Python code and differ only in the module called. Prints one JSON object on stdout:
timings in seconds plus what the caller needs to check that both systems saw the same data.

    bench.py SYSTEM keys N_KEYS SEED SHAPE_JSON        -> random field requests (no store needed)
    bench.py SYSTEM readone CONFIG KEYS_JSON WARMUP    -> per-field retrieve+read times
    bench.py SYSTEM list CONFIG                        -> time to list and touch every key
    bench.py SYSTEM archive CONFIG CORPUS MODE         -> archive+flush time (MODE: one | each)

SYSTEM is `pyfdb` or `fieldstore`.
"""

import hashlib
import json
import pathlib
import random
import sys
import time


def open_fdb(system, config):
    # Both accept a path to the same YAML shape; only the module differs.
    if system == "pyfdb":
        import pyfdb

        return pyfdb.FDB(pathlib.Path(config))
    import fieldstore

    return fieldstore.FDB(pathlib.Path(config))


def element_key(system, element):
    # What a user reads from each element: the whole key as a dict.
    if system == "pyfdb":
        return element.combined_key()
    return element.key


def list_all(system, fdb):
    # pyfdb lists everything for an empty selection; fieldstore for none.
    return fdb.list({}) if system == "pyfdb" else fdb.list()


def keys(n, seed, shape):
    # Random fields of the corpus, as full-key requests with string values (what both APIs take).
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        req = dict(shape["base"])
        for axis, values in shape["axes"].items():
            req[axis] = str(rng.choice(values))
        out.append(req)
    return {"keys": out}


def readone(system, config, keys_path, warmup):
    requests = json.loads(pathlib.Path(keys_path).read_text())["keys"]
    fdb = open_fdb(system, config)
    digest = hashlib.sha256()
    times = []
    total = 0
    for i, req in enumerate(requests):
        t0 = time.perf_counter()
        with fdb.retrieve(req) as reader:
            data = reader.read()
        t1 = time.perf_counter()
        if i >= warmup:
            times.append(t1 - t0)
            digest.update(data)
            total += len(data)
    return {"times": times, "bytes": total, "digest": digest.hexdigest()}


def listing(system, config):
    fdb = open_fdb(system, config)
    count = 0
    t0 = time.perf_counter()
    for element in list_all(system, fdb):
        key = element_key(system, element)
        count += 1
    t1 = time.perf_counter()
    # Untimed second pass: an order-free digest of every key, to check both systems listed the
    # same fields with the same values. Empty values are left out: fieldstore's key keeps the
    # schema's optional keywords a field does not have (quantile=''), pyfdb 5.25 drops them.
    digest = 0
    for element in list_all(system, fdb):
        key = element_key(system, element)
        line = ",".join(f"{k}={v}" for k, v in sorted(key.items()) if v != "")
        digest ^= int.from_bytes(hashlib.sha256(line.encode()).digest()[:8], "little")
    return {"time": t1 - t0, "count": count, "digest": f"{digest:016x}"}


def split_grib(data):
    # GRIB edition 1 or 2 framing, enough for the sample corpus (no padding between messages).
    out = []
    pos = 0
    while pos < len(data):
        if data[pos : pos + 4] != b"GRIB":
            raise ValueError(f"no GRIB message at offset {pos}")
        edition = data[pos + 7]
        if edition == 2:
            length = int.from_bytes(data[pos + 8 : pos + 16], "big")
        else:
            length = int.from_bytes(data[pos + 4 : pos + 7], "big")
        out.append(data[pos : pos + length])
        pos += length
    return out


def archive(system, config, corpus, mode):
    data = pathlib.Path(corpus).read_bytes()
    messages = split_grib(data) if mode == "each" else [data]
    fdb = open_fdb(system, config)
    t0 = time.perf_counter()
    for message in messages:
        fdb.archive(message)
    fdb.flush()
    t1 = time.perf_counter()
    return {"time": t1 - t0, "messages": len(split_grib(data)) if mode == "one" else len(messages)}


def main(argv):
    system, workload, *args = argv
    if system not in ("pyfdb", "fieldstore"):
        raise SystemExit(f"unknown system {system!r}: pyfdb or fieldstore")
    if workload == "keys":
        result = keys(int(args[0]), int(args[1]), json.loads(args[2]))
    elif workload == "readone":
        result = readone(system, args[0], args[1], int(args[2]))
    elif workload == "list":
        result = listing(system, args[0])
    elif workload == "archive":
        result = archive(system, args[0], args[1], args[2])
    else:
        raise SystemExit(f"unknown workload {workload!r}")
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main(sys.argv[1:])

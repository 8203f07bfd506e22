"""GribJump as the reference for fieldstore's extraction (run by extract/tests.rs).

argv: a GRIB file and a JSON file of requests [{"offset": N, "ranges": [[lo, hi], ...]}, ...].
Scans the file with gribjump-scan-files (writing FILE.gribjump), extracts every request with
extract_from_paths and prints one JSON list: per request, per range, {"values": [...], "mask":
[...]}, values as the integers of their IEEE bits (exact through JSON), mask words as integers.
"""
import json
import struct
import os
import subprocess
import sys
import tempfile

import gribjumplib

path, requests_file = sys.argv[1], sys.argv[2]
requests = json.load(open(requests_file))
home = tempfile.mkdtemp()
config = os.path.join(home, "gribjump.yaml")
with open(config, "w") as f:
    f.write("ignoreGridHash: true\n")
os.environ["GRIBJUMP_CONFIG_FILE"] = config
os.environ["FDB_HOME"] = home
os.makedirs(os.path.join(home, "etc", "fdb"), exist_ok=True)
scan = os.path.join(os.path.dirname(gribjumplib.__file__), "bin", "gribjump-scan-files")
subprocess.run([scan, path], check=True, stdout=subprocess.DEVNULL)

import pygribjump as pygj  # noqa: E402  (after the environment is set)

gj = pygj.GribJump()
reqs = [
    pygj.PathExtractionRequest(path, "file", r["offset"], "", 0, [tuple(x) for x in r["ranges"]])
    for r in requests
]
out = []
for result in gj.extract_from_paths(reqs):
    ranges = []
    for values, mask in zip(result.values, result.masks):
        ranges.append(
            {
                "values": [struct.unpack("<Q", struct.pack("<d", float(v)))[0] for v in values],
                "mask": [int(m) for m in mask],
            }
        )
    out.append(ranges)
print(json.dumps(out))

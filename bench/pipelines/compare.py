"""Checks two runs of bench/pipelines/means.yaml wrote the same outputs (bench/pipelines.sh).

Usage: python compare.py DIR_A DIR_B PRINT_A PRINT_B POINTS
  DIR_*: the OUT_DIR of each run (daily.raw, monthly.raw: float64 values, one field after another)
  PRINT_*: what each run printed (the plan's `print` actions: one `tag=Field` line per output)
Prints one line: "<daily outputs> <monthly outputs> <values compared> <largest relative difference>"
and exits 1 (naming the first difference) when the outputs differ by more than 1e-12 relative, in
number, or in the window metadata each output carries.
"""

import json
import os
import re
import sys

import numpy as np

KEYS = ("operation", "operation-frequency", "startDate", "startTime", "previousDate", "previousTime",
        "currentDate", "currentTime", "startStepInHours", "endStepInHours", "step", "step-frequency",
        "paramId", "param")


def printed(path):
    out = []
    for line in open(path, errors="replace"):
        if "tag=Field" not in line:
            continue
        m = re.search(r"\]\[([^\]]*)\] Message\(.*metadata=(\{.*\}), payload-size", line)
        if not m:
            sys.exit("unparsed print line: " + line[:200])
        md = json.loads(m.group(2))
        out.append((m.group(1), {k: md.get(k) for k in KEYS}))
    return out


def read_values(path):
    # MultIO creates a file sink's file when the plan starts, fieldstore at the first output
    return np.fromfile(path, dtype=np.float64) if os.path.exists(path) else np.empty(0)


def main():
    a, b, pa, pb, points = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    ma, mb = printed(pa), printed(pb)
    if len(ma) != len(mb):
        sys.exit("outputs: %d from the reference, %d from fieldstore" % (len(ma), len(mb)))
    for i, (x, y) in enumerate(zip(ma, mb)):
        if x != y:
            sys.exit("output %d metadata differs:\n  reference  %s\n  fieldstore %s" % (i, x, y))
    counts = []
    values = 0
    worst = 0.0
    for name in ("daily.raw", "monthly.raw"):
        va, vb = read_values("%s/%s" % (a, name)), read_values("%s/%s" % (b, name))
        if va.size != vb.size:
            sys.exit("%s: %d values from the reference, %d from fieldstore" % (name, va.size, vb.size))
        if va.size % points:
            sys.exit("%s: %d values is not a whole number of %d-point fields" % (name, va.size, points))
        counts.append(va.size // points)
        if va.size:
            rel = np.abs(va - vb) / np.maximum(np.abs(va), 1e-300)
            k = int(np.argmax(rel))
            if not rel[k] <= 1e-12:
                sys.exit("%s value %d: reference %r, fieldstore %r" % (name, k, float(va[k]), float(vb[k])))
            worst = max(worst, float(rel[k]))
        values += va.size
    if sum(counts) != len(ma):
        sys.exit("%d fields in the files, %d printed" % (sum(counts), len(ma)))
    print(counts[0], counts[1], values, "%.2g" % worst)


if __name__ == "__main__":
    main()

"""Fields on the grids ecCodes ships samples of (reduced Gaussian, regular Gaussian, rotated
lat/lon), with smooth values, for the web view's browser test: grib_set for the keys,
grib_get_data for the points, grib_filter to set the values. Needs libeccodes-tools."""

import math
import os
import subprocess
import sys

SAMPLES = "/usr/share/eccodes/samples"
KEYS = "setLocalDefinition=1,localDefinitionNumber=1"
MARS = "class=od,expver=0002,stream=oper,date=20261122,time=1200,type=fc,levtype=pl,levelist=500,step=0"


def make(sample, param, out, tmp):
    keyed = os.path.join(tmp, f"{param}.keyed.grib")
    subprocess.run(["grib_set", "-s", KEYS, f"{SAMPLES}/{sample}.tmpl", keyed + ".0"], check=True)
    subprocess.run(["grib_set", "-s", f"{MARS},param={param}", keyed + ".0", keyed], check=True)
    data = subprocess.run(["grib_get_data", keyed], check=True, capture_output=True, text=True).stdout
    values = []
    for line in data.splitlines()[1:]:
        lat, lon = (float(x) for x in line.split()[:2])
        values.append(250 + 30 * math.cos(math.radians(lat)) + 8 * math.sin(math.radians(3 * lon)))
    rules = os.path.join(tmp, f"{param}.rules")
    with open(rules, "w") as f:
        f.write("set bitsPerValue = 16;\nset values = {" + ",".join(f"{v:.3f}" for v in values) + "};\n")
        f.write(f'write "{out}";\n')
    subprocess.run(["grib_filter", rules, keyed], check=True)


def main():
    out, tmp = sys.argv[1], sys.argv[2]
    parts = []
    for sample, param in (("reduced_gg_pl_32_grib2", 130), ("regular_gg_pl_grib2", 131),
                          ("rotated_ll_pl_grib2", 132)):
        f = os.path.join(tmp, f"grid{param}.grib")
        make(sample, param, f, tmp)
        parts.append(open(f, "rb").read())
    open(out, "wb").write(b"".join(parts))


if __name__ == "__main__":
    main()

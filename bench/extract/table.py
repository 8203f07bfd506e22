"""The checks and tables of bench/extract.sh, from the JSON it leaves in DIR (bench.py's outputs,
the CLI's --json outputs, hyperfine's exports): python table.py DIR META STEPS REPEATS QUICK CONFIGS.
Any disagreement with ecCodes' full decode on FDB5 exits 1."""
import json, math, statistics, sys
work, meta_file, steps, R, quick, configs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1", sys.argv[6].split()
meta = json.load(open(meta_file))
ref = json.load(open(f"{work}/ref.json"))
sides = {"local": json.load(open(f"{work}/local.json"))}
for c in configs[1:]:
    sides[c] = json.load(open(f"{work}/{c}.json"))
bad = []
# every method, every side: the values of ecCodes' full decode on FDB5, bit for bit
for packing in meta["packings"]:
    for what in ("point", "box"):
        want = ref["runs"]["decode"][packing][what]["digest"]
        for name, res in [("ref", ref)] + list(sides.items()):
            for method, per in res["runs"].items():
                got = per[packing][what]["digest"]
                if got != want:
                    bad.append(f"{name} {method} {packing} {what}: {got} != decode's {want}")
# the CLI: one item per field in request order, the point's values; bytes read
cli = {}
for c in configs:
    for packing in meta["packings"]:
        for what in ("point", "box"):
            items = json.load(open(f"{work}/cli-{c}-{packing}-{what}.json"))
            if len(items) != steps:
                bad.append(f"CLI {c} {packing} {what}: {len(items)} items for {steps} fields")
            vals = [x for it in items for sel in it["values"] for x in sel]
            n = len(vals)
            if what == "point":
                want = ref["runs"]["decode"][packing]["point"]["values"]
                if [float(x) for x in vals] != want:
                    bad.append(f"CLI {c} {packing} point: {vals[:3]}... != decode's {want[:3]}...")
            elif n != 10000 * steps:
                bad.append(f"CLI {c} {packing} box: {n} values, not {10000 * steps}")
            hf = json.load(open(f"{work}/hf-{c}-{packing}-{what}.json"))["results"][0]
            cli[c, packing, what] = (hf["median"], min(hf["times"]), max(hf["times"]),
                                     sum(it.get("bytes_read") or 0 for it in items))
            # the Python module reads as little (a wheel older than the server's Extract message
            # extracts on the client, from whole fields)
            py_read = sides[c].get("bytes_read", {}).get(packing, {}).get(what)
            if py_read is not None and py_read != cli[c, packing, what][3]:
                bad.append(f"{c} {packing} {what}: Python's FDB.extract read {py_read:,} bytes, the CLI {cli[c, packing, what][3]:,}")
if bad:
    print("DISAGREE:\n  " + "\n  ".join(bad), file=sys.stderr)
    sys.exit(1)
print(f"All values agree bit for bit with ecCodes' full decode (every method, every side; the CLI's point values and box sizes).\n")

def ms(t):
    return f"{t * 1000:.2f}" if t < 0.1 else f"{t * 1000:.0f}"

def tm(res, method, packing, what):
    e = res["runs"].get(method, {}).get(packing, {}).get(what)
    return e["time"]["median"] if e else None

def cell(t):
    return "-" if t is None else ms(t)

def bar(ratio, need):
    if quick:
        return f"{ratio:.1f}x"
    return f"{ratio:.1f}x ({'met' if ratio >= need else 'MISSED'}, bar {need}x)"

loc = sides["local"]
print(f"One call = {steps} fields (steps 0-{steps - 1}) of one packing, 0.1° ({meta['points_per_field']:,} points); "
      f"milliseconds per call, median of {R} calls in one process (the decode baseline: {max(1, min(R, 3))}).")
print(f"Point: ({meta['point'][0]}, {meta['point'][1]}) -> grid point {meta['point_index']}; box: 100 x 100 points "
      f"({'/'.join('%g' % x for x in meta['box_degrees'])}), 100 ranges.\n")
print("| packing | selection | FDB5 retrieve + ecCodes decode | fieldstore retrieve + ecCodes decode | GribJump on FDB5 (pygribjump) | fieldstore, its pygribjump | fieldstore FDB.extract | fieldstore vs retrieve + decode | fieldstore vs GribJump | FDB.extract vs GribJump |")
print("|---|---|---|---|---|---|---|---|---|---|")
for packing in meta["packings"]:
    for what in ("point", "box"):
        dec_ref = tm(ref, "decode", packing, what)
        dec_ours = tm(loc, "decode", packing, what)
        gj_ref = tm(ref, "gj", packing, what)
        gj_ours = tm(loc, "gj", packing, what)
        fs = tm(loc, "fs", packing, what)
        r1, r2 = dec_ref / gj_ours, gj_ref / gj_ours
        c1 = bar(r1, 50) if what == "point" else f"{r1:.1f}x"
        c2 = bar(r2, 2) if what == "point" else f"{r2:.1f}x"
        print(f"| {packing} | {what} | {ms(dec_ref)} | {ms(dec_ours)} | {ms(gj_ref)} | {ms(gj_ours)} | {ms(fs)} | {c1} | {c2} | {gj_ref / fs:.1f}x |")
print("\n(The decode baseline decodes each field once for both selections: its point and box times are the same calls. "
      "Ratios: FDB5's retrieve + decode, and GribJump, over fieldstore's pygribjump (the same API, one ExtractionRequest per field); "
      "the last column GribJump over one FDB.extract call naming all the fields; bars on the point.)\n")

names = {"local": "local toc", "remote": "through a server", "s3": "MinIO"}
print(f"Where the data is: Python (one process; ms per call of {steps} fields, median of {R}), the CLI in a new process "
      f"(`fieldstore extract REQ --point`/`--box --json`; hyperfine -N, median (min-max) of {max(2, R * 2) if R >= 2 else 2} runs), "
      f"bytes read (the CLI's `bytes_read`, summed over the {steps} fields) against the whole fields.\n")
print("| store | packing | selection | pygribjump | FDB.extract | retrieve + ecCodes decode | CLI, new process | bytes read | of whole fields |")
print("|---|---|---|---|---|---|---|---|---|")
for c in configs:
    res = sides[c]
    for packing in meta["packings"]:
        whole = meta["bytes"][packing]
        for what in ("point", "box"):
            med, lo, hi, read = cli[c, packing, what]
            print(f"| {names[c]} | {packing} | {what} | {cell(tm(res, 'gj', packing, what))} | {cell(tm(res, 'fs', packing, what))} | "
                  f"{cell(tm(res, 'decode', packing, what))} | {ms(med)} ({ms(lo)}-{ms(hi)}) | {read:,} | {read / whole * 100:.2g} % of {whole / 1e6:.0f} MB |")

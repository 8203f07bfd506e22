#!/usr/bin/env bash
# Archive of an ensemble's small fields, `fieldstore write` against FDB5's `fdb-write`, same run:
# 50 members (the control forecast in stream=oper, 49 perturbed ones, GRIB2 template 4.1, in
# stream=enfo) x 4 params x 10 levels x STEPS steps, POINTS grid points a field (64: ~330 B).
# Each system archives the same file into a fresh store REPEATS times (alternating which goes
# first); medians, min and max. Usage: [POINTS=64] bench/ensemble-write.sh [STEPS=50] [REPEATS=1]
# (STEPS=50: 100,000 fields; FDB5 takes minutes for them.)
set -euo pipefail
cd "$(dirname "$0")/.."
S=${1:-50}
R=${2:-1}
. bench/lib.sh
bench_setup
$fs sample --out "$work/ens.grib" --params t/u/v/q --levels 1000/925/850/700/500/400/300/250/200/100 \
  --steps "$(seq -s/ 0 $((S - 1)))" --members 49 --points "${POINTS:-64}" >/dev/null 2>&1
fields=$((S * 40 * 50))
size=$(stat -c %s "$work/ens.grib")
for r in $(seq 1 "$R"); do
  order="fdb5 fieldstore"; [ $((r % 2)) -eq 0 ] && order="fieldstore fdb5"
  for sys in $order; do
    root="$work/root-$sys-$r"; mkdir -p "$root"
    printf 'type: local\nengine: toc\nschema: %s\nspaces: [{handler: Default, roots: [{path: %s}]}]\n' "$schema" "$root" > "$work/$sys.yaml"
    export FDB5_CONFIG_FILE="$work/$sys.yaml"
    sync; t0=$(now)
    if [ $sys = fdb5 ]; then fdb-write "$work/ens.grib" >/dev/null 2>&1; else "$fs" write "$work/ens.grib" >/dev/null 2>&1; fi
    echo "$(now) - $t0" | bc >> "$work/write.$sys"
    rm -rf "$root"
  done
done
f=$(stats "$work/write.fdb5"); o=$(stats "$work/write.fieldstore")
fm=${f%% *}; om=${o%% *}
echo "| ensemble write ($fields fields, $((size / fields)) B each, $R runs) | FDB5 median s (min-max) | fieldstore median s (min-max) | FDB5 / fieldstore |"
echo "| --- | --- | --- | --- |"
echo "| \`fdb-write\` vs \`fieldstore write\` | $fm ($(echo $f | cut -d' ' -f2)-$(echo $f | cut -d' ' -f3)) | $om ($(echo $o | cut -d' ' -f2)-$(echo $o | cut -d' ' -f3)) | $(echo "scale=2; $fm / $om" | bc)x |"
echo "fields/s: FDB5 $(echo "$fields / $fm" | bc), fieldstore $(echo "$fields / $om" | bc)"

#!/usr/bin/env bash
# One field in a new process (issue 34.2, start-up): `fdb-read REQ out` (Debian's FDB5 5.10.8)
# against `fieldstore read REQ out` on the stores FDB5 wrote that bench/fdb5-stores.sh keeps
# (the 12,000- and 1,000,000-field ensembles, read in place; built there once, 20-40 minutes for
# the large one: `bench/fdb5-stores.sh --build-only [FIELDS]`), hyperfine -N, warm-up runs,
# medians, and the machine's floor in the same run (`cp` of the field: a new process copying it).
# FS_BEFORE=path adds another fieldstore binary (e.g. one linking ecCodes) to the same run.
# The same bytes from every reader are checked; with `--check-eccodes` the run fails if
# `fieldstore read` opens any libeccodes (LD_DEBUG=files): a read needs none.
# Usage: bench/startup.sh [--check-eccodes] [RUNS=30]
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = "--check-eccodes" ]; then check=1; shift; fi
runs=${1:-30}
. bench/lib.sh
bench_setup
export FDB_DBNAMES_FILE=/nonexistent
cache=${BENCH_CACHE:-$HOME/.cache/fieldstore}
[ -n "${FS_BEFORE:-}" ] && cp "$FS_BEFORE" "$work/before"
echo "| store | fdb-read (s) | fieldstore read (s) | ratio | $([ -n "${FS_BEFORE:-}" ] && echo 'before (s) | ')cp floor (s) |"
echo "| --- | --- | --- | --- | $([ -n "${FS_BEFORE:-}" ] && echo '--- | ')--- |"
for family in bench-fdb5-12k bench-fdb5-1m; do
  store=$(ls -d "$cache/$family"/v1-* 2>/dev/null | head -1 || true)
  if [ -z "$store" ] || [ ! -e "$store/.complete" ]; then
    echo "no cached store $cache/$family: bench/fdb5-stores.sh --build-only makes it" >&2
    continue
  fi
  # The shape is in the store's name: FIELDS f, BATCHES x 5 steps; members as fdb5-stores.sh has them.
  v=$(basename "$store")
  fields=$(echo "$v" | sed 's/.*-\([0-9]*\)f-.*/\1/')
  batches=$(echo "$v" | sed 's/.*f-\([0-9]*\)x.*/\1/')
  steps=$((batches * 5)); members=$(( fields / (400 * steps) - 1 )); mid=$((steps / 2))
  printf 'type: local\nengine: toc\nschema: %s\nspaces:\n- handler: Default\n  roots:\n  - path: %s\n' \
    "$schema" "$store/root" > "$work/c.yaml"
  export FDB5_CONFIG_FILE=$work/c.yaml FDB_CONFIG_FILE=$work/c.yaml
  echo "retrieve,class=od,expver=0001,stream=enfo,date=20261122,time=1200,domain=g,type=pf,levtype=pl,step=$((mid * 6)),number=$(( (members + 1) / 2 )),levelist=500,param=130" > "$work/one.req"
  fdb-read "$work/one.req" "$work/one.fdb5" >/dev/null 2>&1
  "$fs" read "$work/one.req" "$work/one.fs" 2>/dev/null
  [ -s "$work/one.fdb5" ] && cmp -s "$work/one.fdb5" "$work/one.fs" || { echo "DISAGREE: $family: the bytes differ" >&2; exit 1; }
  if [ "$check" = 1 ] && LD_DEBUG=files "$fs" read "$work/one.req" "$work/one.fs" 2>&1 >/dev/null | grep -q 'file=.*libeccodes'; then
    echo "FAIL: $family: fieldstore read opened libeccodes" >&2; exit 1
  fi
  cmds=(-n fdb5 "fdb-read $work/one.req $work/one.fdb5" -n fs "$fs read $work/one.req $work/one.fs")
  [ -n "${FS_BEFORE:-}" ] && cmds+=(-n before "$work/before read $work/one.req $work/one.before")
  cmds+=(-n floor "cp $work/one.fdb5 $work/one.cp")
  hyperfine -N --warmup 3 --runs "$runs" --export-json "$work/hf.json" "${cmds[@]}" >/dev/null 2>&1
  cmp -s "$work/one.fdb5" "$work/one.fs" || { echo "DISAGREE: $family (hyperfine)" >&2; exit 1; }
  python3 - "$work/hf.json" "$fields" <<'EOF'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
m = lambda n: "%.4f (%.4f-%.4f)" % (r[n]["median"], r[n]["min"], r[n]["max"])
ratio = r["fdb5"]["median"] / r["fs"]["median"]
before = (m("before") + " | ") if "before" in r else ""
print(f"| {int(sys.argv[2]):,} fields | {m('fdb5')} | {m('fs')} | {ratio:.1f}x | {before}{m('floor')} |")
EOF
done

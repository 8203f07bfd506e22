#!/usr/bin/env bash
# fieldstore's Python module against pyfdb 5.25 (with fdb5lib), in one run, on the same store
# contents: one random field retrieved and read through a warm handle, the whole store listed
# (every element's key read, as a user would), and N/10 small fields archived+flushed from bytes
# already in memory (in one call, and one call per field). Rounds alternate which system goes
# first; archives go to a fresh store each time. Medians (min-max) over rounds, and the ratios.
#
# Usage: [PYFDB_PYTHON=python] [FS_PYTHON=python] bench/python/pyfdb-compare.sh [FIELDS=100000] [ROUNDS=5]
#   PYFDB_PYTHON: an interpreter with pyfdb and fdb5lib (default target/py-venv-ref/bin/python, which
#     scripts/python-test makes); without one the pyfdb side is skipped, saying so.
#   FS_PYTHON: an interpreter with fieldstore installed, measured as it is; by default
#     target/py-venv, into which this checkout is built and installed first (scripts/python-install,
#     release build), so what is measured is this checkout.
# With ROUNDS=1 and few fields (bench/run-all --quick) it is a check that both sides agree: same
# number of fields listed with the same keys, same bytes for the same random fields.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-100000}
R=${2:-5}
. bench/lib.sh
bench_setup "$PWD/target"
here=$PWD/bench/python

# --- The two interpreters ---------------------------------------------------------------------
pyfdb_py=${PYFDB_PYTHON:-$PWD/target/py-venv-ref/bin/python}
if [ ! -x "$pyfdb_py" ] || ! "$pyfdb_py" -c 'import pyfdb' >/dev/null 2>&1; then
  echo "pyfdb side skipped: no interpreter with pyfdb at $pyfdb_py (set PYFDB_PYTHON, or run scripts/python-test, which makes target/py-venv-ref)" >&2
  pyfdb_py=""
fi
if [ -z "${FS_PYTHON:-}" ]; then
  [ -x target/py-venv/bin/python ] || python3 -m venv target/py-venv
  [ -x scripts/python-install ] || { echo "scripts/python-install is missing: cannot build the fieldstore module" >&2; exit 1; }
  # shellcheck disable=SC1091
  (. target/py-venv/bin/activate && scripts/python-install > "$work/python-install.log" 2>&1) \
    || { cat "$work/python-install.log" >&2; echo "scripts/python-install failed" >&2; exit 1; }
  FS_PYTHON=$PWD/target/py-venv/bin/python
fi
fs_py=$FS_PYTHON
"$fs_py" -c 'import fieldstore' || { echo "no fieldstore module in $fs_py" >&2; exit 1; }
systems="fieldstore"
[ -n "$pyfdb_py" ] && systems="pyfdb fieldstore"
py() { if [ "$1" = pyfdb ]; then "$pyfdb_py" "$here/bench.py" "$@"; else "$fs_py" "$here/bench.py" "$@"; fi; }
field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$@"; }
median_ms() { python3 -c 'import json, statistics, sys; print("%.4f" % (1000 * statistics.median(json.load(open(sys.argv[1]))["times"])))' "$1"; }
config() { printf 'type: local\nengine: toc\nschema: %s\nspaces: [{handler: Default, roots: [{path: %s}]}]\n' "$schema" "$1" > "$2"; }

# --- Corpora ----------------------------------------------------------------------------------
# The big store: an ensemble, 25 levels x 16 params x (members+1) x steps = FIELDS, 64 grid points
# (~330 B) a field, so the store is its index. The archive corpus: 2.2 KiB fields, 40 a step.
levels=1000/975/950/925/900/875/850/825/800/775/750/700/650/600/550/500/450/400/350/300/250/225/200/175/150
params=130/131/132/133/135/138/155/129/157/248/203/75/76/246/247/60
steps=5; [ "$N" -lt 20000 ] && steps=1
members=$(( N / (400 * steps) - 1 ))
[ "$members" -ge 1 ] || { echo "FIELDS must be at least 800" >&2; exit 1; }
fields=$(( (members + 1) * 400 * steps ))
$fs sample --out "$work/big.grib" --params $params --levels $levels --members $members \
  --steps "$(seq -s/ 0 $((steps - 1)))" --points 64 2>/dev/null
asteps=$(( (N / 10 + 39) / 40 ))
afields=$(( asteps * 40 ))
$fs sample --out "$work/small.grib" --params t/u/v/q --levels 1000/925/850/700/500/400/300/250/200/100 \
  --steps "$(seq -s/ 0 $((asteps - 1)))" --points 1000 2>/dev/null
shape=$(python3 -c '
import json, sys
levels, params, members, steps = sys.argv[1].split("/"), sys.argv[2].split("/"), int(sys.argv[3]), int(sys.argv[4])
print(json.dumps({"base": {"class": "od", "expver": "0001", "stream": "enfo", "date": "20261122", "time": "1200",
  "domain": "g", "type": "pf", "levtype": "pl"}, "axes": {"number": list(range(1, members + 1)),
  "step": list(range(steps)), "levelist": levels, "param": params}}))' "$levels" "$params" "$members" "$steps")

# Both big stores hold the same corpus: pyfdb's archived by pyfdb itself (one call), fieldstore's
# by the CLI. Untimed here; the archive workload below is the timed one.
for sys in $systems; do
  mkdir -p "$work/big-$sys"; config "$work/big-$sys" "$work/big-$sys.yaml"
done
[ -n "$pyfdb_py" ] && py pyfdb archive "$work/big-pyfdb.yaml" "$work/big.grib" one > "$work/build.pyfdb"
$fs --config "$work/big-fieldstore.yaml" write "$work/big.grib" >/dev/null 2>&1

# --- Rounds -----------------------------------------------------------------------------------
nkeys=2000; [ "$R" -eq 1 ] && [ "$N" -lt 20000 ] && nkeys=200
warmup=50; [ "$nkeys" -le 200 ] && warmup=10
for r in $(seq 1 "$R"); do
  py fieldstore keys $((nkeys + warmup)) "$r" "$shape" > "$work/keys.json"
  order=$systems; [ $((r % 2)) -eq 0 ] && [ -n "$pyfdb_py" ] && order="fieldstore pyfdb"
  for sys in $order; do
    # Dirty pages left by the previous step (the other system's archive) are written back first,
    # untimed, so neither system pays for the other's I/O.
    sync
    py "$sys" readone "$work/big-$sys.yaml" "$work/keys.json" "$warmup" > "$work/readone.$sys.json"
    median_ms "$work/readone.$sys.json" >> "$work/readone.$sys"
    python3 -c 'import json, sys; print("\n".join(map(str, json.load(open(sys.argv[1]))["times"])))' \
      "$work/readone.$sys.json" >> "$work/readone-all.$sys"
    sync
    py "$sys" list "$work/big-$sys.yaml" > "$work/list.$sys.json"
    field "$work/list.$sys.json" time >> "$work/list.$sys"
    for mode in one each; do
      root="$work/arch-$sys"; rm -rf "$root"; mkdir -p "$root"; config "$root" "$work/arch-$sys.yaml"
      sync
      py "$sys" archive "$work/arch-$sys.yaml" "$work/small.grib" $mode > "$work/arch.$sys.json"
      field "$work/arch.$sys.json" time >> "$work/archive-$mode.$sys"
      rm -rf "$root"
    done
  done
  listed=$(field "$work/list.fieldstore.json" count)
  [ "$listed" = "$fields" ] || { echo "fieldstore listed $listed fields, expected $fields" >&2; exit 1; }
  if [ -n "$pyfdb_py" ]; then
    for k in count digest; do
      a=$(field "$work/list.pyfdb.json" $k); b=$(field "$work/list.fieldstore.json" $k)
      [ "$a" = "$b" ] || { echo "list $k differs: pyfdb $a, fieldstore $b" >&2; exit 1; }
    done
    for k in bytes digest; do
      a=$(field "$work/readone.pyfdb.json" $k); b=$(field "$work/readone.fieldstore.json" $k)
      [ "$a" = "$b" ] || { echo "random fields differ ($k): pyfdb $a, fieldstore $b" >&2; exit 1; }
    done
  fi
done

# --- Report -----------------------------------------------------------------------------------
pct() { python3 -c '
import statistics, sys
t = sorted(float(x) * 1000 for x in open(sys.argv[1]))
q = lambda p: t[min(len(t) - 1, int(p * len(t)))]
print("p10 %.3f, p50 %.3f, p90 %.3f, p99 %.3f ms (%d fields)" % (q(0.1), q(0.5), q(0.9), q(0.99), len(t)))' "$1"; }
echo "| workload | pyfdb median s (min-max) | fieldstore median s (min-max) | pyfdb / fieldstore |"
echo "| --- | --- | --- | --- |"
for w in readone list archive-one archive-each; do
  read -r om omin omax <<<"$(stats "$work/$w.fieldstore")"
  fcol="-"; ratio="-"
  if [ -n "$pyfdb_py" ]; then
    read -r fm fmin fmax <<<"$(stats "$work/$w.pyfdb")"
    fcol="$fm ($fmin-$fmax)"
    ratio="$(python3 -c 'import sys; print("%.1fx" % (float(sys.argv[1]) / float(sys.argv[2])))' \
      "$(sort -n "$work/$w.pyfdb" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')" \
      "$(sort -n "$work/$w.fieldstore" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')")"
    [ $w = readone ] && fcol="$fm ms ($fmin-$fmax)"
  fi
  ocol="$om ($omin-$omax)"
  [ $w = readone ] && ocol="$om ms ($omin-$omax)"
  case $w in
    readone) label="one random field, retrieve+read, warm handle (median per field of each round)";;
    list) label="list all $fields fields, read each element's key";;
    archive-one) label="archive+flush $afields fields of $(( $(stat -c %s "$work/small.grib") / afields )) B, one call";;
    archive-each) label="archive+flush $afields fields, one call per field";;
  esac
  echo "| $label | $fcol | $ocol | $ratio |"
done
echo
[ -n "$pyfdb_py" ] && echo "pyfdb one field, all rounds: $(pct "$work/readone-all.pyfdb")"
echo "fieldstore one field, all rounds: $(pct "$work/readone-all.fieldstore")"
[ -n "$pyfdb_py" ] && echo "pyfdb $("$pyfdb_py" -c 'import pyfdb; print(pyfdb.__version__)') ($pyfdb_py); building its $fields-field store with pyfdb.archive (one call) took $(field "$work/build.pyfdb" time | xargs printf '%.1f') s"
echo "fieldstore $("$fs_py" -c 'import fieldstore; print(fieldstore.__version__)') ($fs_py); $R rounds, alternating which system goes first; $nkeys random fields a round after $warmup warm-up retrieves"
[ -n "$pyfdb_py" ] && echo "checked every round: both listed $fields fields with the same keys; the random fields' bytes are identical"
exit 0

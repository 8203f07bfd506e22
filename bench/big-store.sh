#!/usr/bin/env bash
# Large stores side by side with FDB5 5.10.8, in one run: list of the whole store and of a partial
# request (one param, all steps), each with peak RSS; one-field retrieve in a new process (as a
# post-processing job sees it). Each measurement is repeated; medians (min-max) are reported.
#
# The corpus (real GRIB2, made by `fieldstore hammer` and read back) and the FDB5 store take long
# to build (FDB5 archives ~700 fields/s here: 25 minutes for 1,000,000 fields), so both are kept in
# BENCH_CACHE (default ~/.cache/fieldstore-bench) and reused by later runs; fieldstore's store is
# rebuilt every run from the same corpus. Usage: bench/big-store.sh [FIELDS=1000000] [REPEATS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
R=${2:-5}
. bench/lib.sh
bench_setup
cache=${BENCH_CACHE:-$HOME/.cache/fieldstore-bench}
mkdir -p "$cache"

# Shape: 50 members x 25 levels x 16 params = 20,000 fields a step; 64 grid points (~330 B) a field,
# so the store's size is its index, not its data.
steps=$(( (N + 19999) / 20000 ))
fields=$((steps * 20000))
shape="--members 50 --levels 25 --params 16 --steps $steps --points 64 --expver 0001 --date 20261122"
base="class=od,expver=0001,stream=enfo,date=20261122,time=1200,domain=g,type=pf,levtype=pl"
levels=1000/975/950/925/900/875/850/825/800/775/750/700/650/600/550/500/450/400/350/300/250/225/200/175/150
params=130/131/132/133/135/138/155/129/157/248/203/75/76/246/247/60
corpus=$cache/corpus-$fields.grib
config() { printf 'type: local\nengine: toc\nschema: %s\nspaces: [{handler: Default, roots: [{path: %s}]}]\n' "$schema" "$1" > "$2"; }

if [ ! -s "$corpus" ]; then
  echo "making the corpus: $fields fields" >&2
  mkdir -p "$work/gen"; config "$work/gen" "$work/gen.yaml"
  # shellcheck disable=SC2086
  $fs --config "$work/gen.yaml" hammer $shape --flush-every 0 >&2
  echo "retrieve,$base,step=0/to/$((steps - 1))/by/1,number=1/to/50,levelist=$levels,param=$params" > "$work/gen.req"
  $fs --config "$work/gen.yaml" read "$work/gen.req" "$corpus.tmp"
  [ "$(stat -c %s "$corpus.tmp")" -gt $((fields * 300)) ] || { echo "the corpus is short: $(stat -c %s "$corpus.tmp") bytes for $fields fields" >&2; exit 1; }
  mv "$corpus.tmp" "$corpus"
  rm -rf "$work/gen"
fi
size=$(stat -c %s "$corpus")

fdb5_root=$cache/fdb5-$fields
if [ ! -e "$fdb5_root/.complete" ]; then
  echo "building the FDB5 store (fdb-write, once; cached in $fdb5_root)" >&2
  rm -rf "$fdb5_root"; mkdir -p "$fdb5_root"; config "$fdb5_root" "$work/fdb5.yaml"
  t0=$(now); FDB5_CONFIG_FILE="$work/fdb5.yaml" fdb-write "$corpus"; t1=$(now)
  echo "$t1 - $t0" | bc > "$fdb5_root/.archive-seconds"
  touch "$fdb5_root/.complete"
fi
config "$fdb5_root" "$work/fdb5.yaml"
fs_root=$work/fs-root; mkdir -p "$fs_root"; config "$fs_root" "$work/fieldstore.yaml"
sync; t0=$(now); $fs --config "$work/fieldstore.yaml" write "$corpus" 2>/dev/null; t1=$(now)
echo "$t1 - $t0" | bc > "$work/archive.fieldstore"
cp "$fdb5_root/.archive-seconds" "$work/archive.fdb5"

mid=$((steps / 2))
echo "retrieve,$base,step=$mid,number=25,levelist=500,param=130" > "$work/one.req"
partial="class=od,expver=0001,stream=enfo,date=20261122,time=1200,domain=g,type=pf,levtype=pl,param=130"

# timed NAME SYSTEM COMMAND...: elapsed seconds and peak RSS (KiB) of the command.
timed() {
  local name=$1 sys=$2; shift 2
  local t0 t1
  t0=$(now); /usr/bin/time -f "%M" -o "$work/t" "$@" > "$work/out.$name.$sys" 2>/dev/null; t1=$(now)
  echo "$t1 - $t0" | bc >> "$work/$name.$sys"; cat "$work/t" >> "$work/$name.$sys.rss"
}
for r in $(seq 1 "$R"); do
  for sys in fdb5 fieldstore; do
    export FDB5_CONFIG_FILE="$work/$sys.yaml"
    if [ $sys = fdb5 ]; then
      timed list $sys fdb-list --all --minimum-keys= --porcelain
      timed partial $sys fdb-list --minimum-keys= --porcelain "$partial"
      timed readone $sys fdb-read "$work/one.req" "$work/one.$sys"
    else
      timed list $sys "$fs" list --all --porcelain
      timed partial $sys "$fs" list --porcelain "$partial"
      timed readone $sys "$fs" read "$work/one.req" "$work/one.$sys"
    fi
  done
  for w in list partial; do
    a=$(wc -l < "$work/out.$w.fdb5"); b=$(wc -l < "$work/out.$w.fieldstore")
    [ "$a" = "$b" ] || { echo "$w: FDB5 listed $a fields, fieldstore $b" >&2; exit 1; }
  done
  cmp -s "$work/one.fdb5" "$work/one.fieldstore" || { echo "one-field retrieves differ" >&2; exit 1; }
done
# Short commands again with hyperfine (no shell, no timing wrapper, warm-up runs): the timing
# wrappers above add a few milliseconds to both systems, which hides the ratio of one-field reads.
hyperfine -N --warmup 3 --runs $((R * 6)) --export-json "$work/hf.json" \
  --command-name fdb5 "env FDB5_CONFIG_FILE=$work/fdb5.yaml fdb-read $work/one.req $work/one.fdb5" \
  --command-name fieldstore "$fs --config $work/fieldstore.yaml read $work/one.req $work/one.fieldstore" >/dev/null 2>&1
cmp -s "$work/one.fdb5" "$work/one.fieldstore" || { echo "one-field retrieves differ (hyperfine)" >&2; exit 1; }
read -r hf_f hf_fmin hf_fmax hf_o hf_omin hf_omax <<<"$(python3 -c '
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
print(" ".join("%.4f %.4f %.4f" % (r[c]["median"], r[c]["min"], r[c]["max"]) for c in ("fdb5", "fieldstore")))' "$work/hf.json")"
listed=$(wc -l < "$work/out.list.fieldstore")
[ "$listed" = "$fields" ] || { echo "listed $listed fields, expected $fields" >&2; exit 1; }

echo "| workload ($fields fields, one database, ECMWF schema) | FDB5 median s (min-max) | peak RSS MiB | fieldstore median s (min-max) | peak RSS MiB | FDB5 / fieldstore |"
echo "| --- | --- | --- | --- | --- | --- |"
for w in archive list partial readone; do
  read -r fm fmin fmax <<<"$(stats "$work/$w.fdb5")"
  read -r om omin omax <<<"$(stats "$work/$w.fieldstore")"
  frss=-; orss=-
  [ -e "$work/$w.fdb5.rss" ] && frss=$(sort -n "$work/$w.fdb5.rss" | tail -1 | awk '{printf "%.0f", $1 / 1024}')
  [ -e "$work/$w.fieldstore.rss" ] && orss=$(sort -n "$work/$w.fieldstore.rss" | tail -1 | awk '{printf "%.0f", $1 / 1024}')
  ratio=$(echo "scale=1; $fm / $om" | bc)
  case $w in
    archive) label="archive+flush (once; FDB5 from cache)";;
    list) label="list whole store";;
    partial) label="list one param, all steps ($(wc -l < "$work/out.partial.fieldstore") fields)";;
    readone) label="retrieve one field (new process)";;
  esac
  echo "| $label | $fm ($fmin-$fmax) | $frss | $om ($omin-$omax) | $orss | ${ratio}x |"
done
echo "| retrieve one field (new process; hyperfine -N, $((R * 6)) runs) | $hf_f ($hf_fmin-$hf_fmax) | - | $hf_o ($hf_omin-$hf_omax) | - | $(echo "scale=1; $hf_f / $hf_o" | bc)x |"
echo
echo "corpus: $fields fields, $((size / 1048576)) MiB; peak RSS is the largest of the runs"

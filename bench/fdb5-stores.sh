#!/usr/bin/env bash
# fieldstore on a store FDB5 wrote, in FDB5's own toc format, read in place: one store archived by
# Debian's FDB5 5.10.8 (/usr/bin/fdb-write), then, in the same run, side by side:
#   - list: `fdb-list class=od,expver=0001 --porcelain` (FDB5) against `fieldstore list` of the same
#     request and fieldstore's `fdb-list` name (scripts/install-fdb-tools); the fdb-list name's output
#     must be FDB5's byte for byte (also with --location, checked once), `fieldstore list`'s must
#     hold the same lines;
#   - axes: upstream `fdb-axes` (5.10.8 has none: FDB5 5.25's, PyPI fdb5lib, from
#     target/py-venv-ref as scripts/python-test makes it, or FDB525_VENV) against `fieldstore axes`
#     and the fdb-axes name (byte for byte with 5.25's); fieldstore's axes are also checked against
#     the values in FDB5 5.10.8's own listing;
#   - one field in a new process: `fdb-read REQ out` against `fieldstore read REQ out` and the
#     fdb-read name (hyperfine -N, warm-up runs, medians), the same bytes from all three;
#   - `fieldstore convert class=od,expver=0001 --to fieldstore` of a copy of the store (the FDB5
#     store is kept) against a plain `cp -r` of the same files. Both warm (the page cache cannot be
#     dropped here): each round copies the store with `cp -r` (timed: the bar), copies it again
#     with `cp -r` then fsync of every file (timed: as durable as convert's output), converts that
#     copy (timed; --grace 0, so the old catalogue's removal is not a sleep; the default grace is
#     timed once too), checks the converted databases list and read as FDB5's did.
# The machine's limits in the same run: a new process copying the field (`cp`, the floor of a
# one-field read), reading the store's tocs and index files (`cat`, what a list must read at least),
# reading its data files (`cat`, what convert must read at least).
#
# The store: an ensemble (50 members: the control forecast in stream=oper, 49 perturbed ones in
# stream=enfo; 25 levels x 16 params, 64 grid points, ~330 B a field) of 50 steps, archived by 10
# fdb-write runs of 5 steps (100,000 fields) each, so each of the two databases has 10 indexes, as
# 10 model-output batches leave them. Flat layout (FDB_DBNAMES_FILE=/nonexistent: Debian's
# /etc/fdb/dbnames would nest databases in directories, which 5.25 does not list). Fields are made
# by `fieldstore sample` (ecCodes). FDB5 archives ~1,000 fields/s here (440/s with the machine
# busy), so the store is built once (20-40 minutes for 1,000,000 fields; 406 MiB) and kept in
# ${BENCH_CACHE:-~/.cache/fieldstore}/bench-fdb5-1m/VERSION; a new VERSION (shape, FDB5's version)
# replaces the old one.
#
# Usage: bench/fdb5-stores.sh [FIELDS=1000000] [REPEATS=5]
#        bench/fdb5-stores.sh --quick [FIELDS=10000]   (bench/run-all --quick: 2 fdb-write runs,
#            12,000 fields; one round; checks that outputs agree, fails if they do not; no speed bars)
#        bench/fdb5-stores.sh [--quick] --build-only [FIELDS]   (only make the cached store)
#        bench/fdb5-stores.sh --only convert [FIELDS] [REPEATS]   (only convert against cp; FDB5's
#            listing and one fdb-read, once, are still what the converted copies are checked against)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0 build_only=0 only=""
if [ "${1:-}" = "--quick" ]; then quick=1; shift; fi
if [ "${1:-}" = "--build-only" ]; then build_only=1; shift; fi
if [ "${1:-}" = "--only" ]; then only=${2:?--only convert}; shift 2; fi
case "$only" in ""|convert) ;; *) echo "--only: convert is the one section that runs alone" >&2; exit 2;; esac
if [ "$quick" = 1 ]; then N=${1:-10000}; R=1; else N=${1:-1000000}; R=${2:-5}; fi
. bench/lib.sh
bench_setup
export FDB_DBNAMES_FILE=/nonexistent

# --- The store --------------------------------------------------------------------------------
levels=1000/975/950/925/900/875/850/825/800/775/750/700/650/600/550/500/450/400/350/300/250/225/200/175/150
params=130/131/132/133/135/138/155/129/157/248/203/75/76/246/247/60
per_step=400                     # levels x params, per member
batches=10; [ "$N" -lt 100000 ] && batches=2
spb=5                            # steps per fdb-write run
steps=$((batches * spb))
members=$(( (N + per_step * steps - 1) / (per_step * steps) - 1 ))   # perturbed; + the control forecast
[ "$members" -ge 1 ] || { echo "FIELDS must be at least $((2 * per_step * steps))" >&2; exit 1; }
fields=$(( (members + 1) * per_step * steps ))
if [ $((fields % 1000000)) = 0 ]; then label=$((fields / 1000000))m
elif [ $((fields % 1000)) = 0 ]; then label=$((fields / 1000))k
else label=$fields; fi
fdb5_version=$(dpkg-query -W -f='${Version}' fdb5)
version="v1-fdb5_${fdb5_version}-${fields}f-${batches}x${spb}steps-64points"
family=${BENCH_CACHE:-$HOME/.cache/fieldstore}/bench-fdb5-$label
store=$family/$version
root=$store/root
config() {
  printf 'type: local\nengine: toc\nschema: %s\nspaces:\n- handler: Default\n  roots:\n  - path: %s\n' "$schema" "$1" > "$2"
}

if [ ! -e "$store/.complete" ]; then
  echo "building the FDB5 store: $fields fields, $batches fdb-write runs (once; cached in $store)" >&2
  rm -rf "$family"                       # other versions of this store
  building=$store.building
  mkdir -p "$building/root"
  config "$building/root" "$work/build.yaml"
  gen() {  # the fields of batch $1: steps $1*spb .. $1*spb+spb-1, 6 hours apart
    local first=$(( $1 * spb * 6 )) last=$(( ($1 * spb + spb - 1) * 6 ))
    "$fs" sample --out "$work/batch.$1.grib" --params $params --levels $levels --members "$members" \
      --steps "$(seq -s/ "$first" 6 "$last")" --points 64 > "$work/sample.$1.log" 2>&1 \
      || { cat "$work/sample.$1.log" >&2; return 1; }
  }
  gen 0
  for ((b = 0; b < batches; b++)); do
    pid=""
    if [ $((b + 1)) -lt "$batches" ]; then gen $((b + 1)) & pid=$!; fi   # the next batch meanwhile
    t0=$(now)
    FDB5_CONFIG_FILE=$work/build.yaml fdb-write "$work/batch.$b.grib" >> "$building/build.log" 2>&1 \
      || { tail "$building/build.log" >&2; exit 1; }
    t1=$(now)
    echo "$t1 - $t0" | bc >> "$building/archive-seconds"
    rm -f "$work/batch.$b.grib"
    [ -z "$pid" ] || wait "$pid"
    echo "  fdb-write run $((b + 1))/$batches: $(tail -1 "$building/archive-seconds") s" >&2
  done
  echo "$version" > "$building/VERSION"
  touch "$building/.complete"
  mv "$building" "$store"
fi
[ "$build_only" = 1 ] && { echo "the store is in $store"; exit 0; }
config "$root" "$work/fdb5.yaml"
export FDB5_CONFIG_FILE=$work/fdb5.yaml FDB_CONFIG_FILE=$work/fdb5.yaml
archive_s=$(awk '{s += $1} END {printf "%.0f", s}' "$store/archive-seconds")
toc_sums() { find "$root" -type f \( -name 'toc*' -o -name '*.index' \) -print0 | sort -z | xargs -0 md5sum; }
toc_sums > "$work/store.md5"

# fieldstore's FDB5 tool names, linked to the binary measured
scripts/install-fdb-tools --bin "$fs" "$work/tools" >/dev/null 2>&1
tools=$work/tools

# FDB5 5.25 (for fdb-axes), optional
v525=${FDB525_VENV:-$PWD/target/py-venv-ref}
fdb525="" libs525=""
site=$(ls -d "$v525"/lib/python3*/site-packages 2>/dev/null | head -1 || true)
if [ -n "$site" ] && [ -x "$site/fdb5lib/bin/fdb-axes" ]; then
  fdb525=$site/fdb5lib/bin
  libs525=$site/fdb5lib/lib64
  for d in "$site"/*.libs; do [ -d "$d" ] && libs525=$libs525:$d; done
  for d in "$site"/*lib; do [ "$d" != "$site/fdb5lib" ] && [ -d "$d/lib64" ] && libs525=$libs525:$d/lib64; done
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s/fdb-axes "$@"\n' "$libs525" "$fdb525" > "$work/fdb-axes-5.25"
  chmod +x "$work/fdb-axes-5.25"
else
  echo "FDB5 5.25 not found (no fdb5lib in $v525; scripts/python-test makes it, or set FDB525_VENV): fdb-axes is not timed against FDB5" >&2
fi

req="class=od,expver=0001"
mid=$((steps / 2))
one="retrieve,class=od,expver=0001,stream=enfo,date=20261122,time=1200,domain=g,type=pf,levtype=pl,step=$((mid * 6)),number=$(( (members + 1) / 2 )),levelist=500,param=130"
echo "$one" > "$work/one.req"

fail() { echo "DISAGREE: $*" >&2; exit 1; }
# timed NAME COMMAND...: elapsed seconds (appended to $work/NAME) and peak RSS in KiB
# ($work/NAME.rss); standard output into $work/out.NAME.
timed() {
  local name=$1; shift
  local t0 t1
  t0=$(now); /usr/bin/time -f "%M" -o "$work/t" "$@" > "$work/out.$name" 2> "$work/err.$name" || { cat "$work/err.$name" >&2; fail "$name: $* failed"; }; t1=$(now)
  echo "$t1 - $t0" | bc >> "$work/$name"; cat "$work/t" >> "$work/$name.rss"
}

if [ "$only" = convert ]; then
  # what the converted copies must list and read: FDB5's own answers, once
  fdb-list "$req" --porcelain > "$work/out.list.fdb5"
  fdb-read "$work/one.req" "$work/one.fdb5" >/dev/null 2>&1
  [ -s "$work/one.fdb5" ] || fail "fdb-read retrieved nothing"
else
# --- List ---------------------------------------------------------------------------------------
for ((r = 1; r <= R; r++)); do
  # the order rotates, so no system always runs first
  order=("list.fdb5" "list.fs" "list.name")
  for ((k = 0; k < 3; k++)); do
    case ${order[$(( (k + r) % 3 ))]} in
      list.fdb5) timed list.fdb5 fdb-list "$req" --porcelain;;
      list.fs) timed list.fs "$fs" list "$req" --porcelain;;
      list.name) timed list.name "$tools/fdb-list" "$req" --porcelain;;
    esac
  done
  timed floor.list cat "$store/root"/*/toc "$store/root"/*/*.index
  cmp -s "$work/out.list.fdb5" "$work/out.list.name" || fail "fdb-list: fieldstore's fdb-list name differs from FDB5's output (round $r)"
  a=$(wc -l < "$work/out.list.fdb5"); b=$(wc -l < "$work/out.list.fs")
  [ "$a" = "$b" ] || fail "list: FDB5 listed $a fields, fieldstore list $b"
done
listed=$(wc -l < "$work/out.list.fdb5")
[ "$listed" = "$fields" ] || fail "FDB5 listed $listed fields; the store holds $fields"
cmp -s <(sort "$work/out.list.fdb5") <(sort "$work/out.list.fs") || fail "list: fieldstore list's lines are not FDB5's"
fs_list_same=sorted; cmp -s "$work/out.list.fdb5" "$work/out.list.fs" && fs_list_same="byte for byte"
timed loc.fdb5 fdb-list "$req" --porcelain --location
timed loc.name "$tools/fdb-list" "$req" --porcelain --location
cmp -s "$work/out.loc.fdb5" "$work/out.loc.name" || fail "fdb-list --location: fieldstore's fdb-list name differs from FDB5's"

# --- Axes ---------------------------------------------------------------------------------------
"$fs" axes "$req" > "$work/axes.fs"
"$tools/fdb-axes" "$req" > "$work/axes.name"
# fieldstore's axes against the values in FDB5 5.10.8's listing
python3 - "$work/out.list.fdb5" "$work/axes.fs" <<'EOF' || fail "fieldstore axes: not the values in FDB5's listing"
import re, sys
listed = {}
for line in open(sys.argv[1]):
    for k, v in re.findall(r"([^{},=]+)=([^{},]*)", line):
        listed.setdefault(k, set()).add(v)
axes = {}
for line in open(sys.argv[2]):
    k, _, v = line.rstrip("\n").partition(": ")
    axes[k] = set(v.split("/"))
if axes != listed:
    for k in sorted(set(axes) | set(listed)):
        if axes.get(k) != listed.get(k):
            print("  %s: axes %s, listing %s" % (k, sorted(axes.get(k, ())), sorted(listed.get(k, ()))), file=sys.stderr)
    sys.exit(1)
EOF
if [ -n "$fdb525" ]; then
  "$work/fdb-axes-5.25" "$req" > "$work/axes.525"
  cmp -s "$work/axes.525" "$work/axes.name" || { diff "$work/axes.525" "$work/axes.name" | head >&2; fail "fdb-axes: fieldstore's fdb-axes name differs from FDB5 5.25's"; }
fi

# --- One field in a new process, and the short commands ------------------------------------------
fdb-read "$work/one.req" "$work/one.fdb5" >/dev/null 2>&1
"$fs" read "$work/one.req" "$work/one.fs" 2>/dev/null
"$tools/fdb-read" "$work/one.req" "$work/one.name" >/dev/null 2>&1
[ -s "$work/one.fdb5" ] || fail "fdb-read retrieved nothing"
cmp -s "$work/one.fdb5" "$work/one.fs" || fail "one field: fieldstore read's bytes differ from fdb-read's"
cmp -s "$work/one.fdb5" "$work/one.name" || fail "one field: the fdb-read name's bytes differ from fdb-read's"
runs=$((R * 6)); [ "$runs" -lt 30 ] && runs=30; warm=3
[ "$quick" = 1 ] && { runs=3; warm=1; }
hf=(hyperfine -N --warmup "$warm" --runs "$runs")
"${hf[@]}" --export-json "$work/hf.read.json" \
  -n fdb5 "fdb-read $work/one.req $work/one.fdb5" \
  -n fs "$fs read $work/one.req $work/one.fs" \
  -n name "$tools/fdb-read $work/one.req $work/one.name" \
  -n floor "cp $work/one.fdb5 $work/one.cp" >/dev/null 2>&1
cmp -s "$work/one.fdb5" "$work/one.fs" && cmp -s "$work/one.fdb5" "$work/one.name" || fail "one field (hyperfine): bytes differ"
axes_cmds=(-n fs "$fs axes $req" -n name "$tools/fdb-axes $req")
[ -n "$fdb525" ] && axes_cmds=(-n fdb525 "$work/fdb-axes-5.25 $req" "${axes_cmds[@]}")
axruns=$((R * 2)); [ "$axruns" -lt 10 ] && axruns=10; [ "$quick" = 1 ] && axruns=3
hyperfine -N --warmup 1 --runs "$axruns" --export-json "$work/hf.axes.json" "${axes_cmds[@]}" >/dev/null 2>&1
hfstat() {  # FILE NAME: median min max
  python3 -c '
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}[sys.argv[2]]
print("%.4f %.4f %.4f" % (r["median"], r["min"], r["max"]))' "$@"
}

fi  # not --only convert

# --- Convert against cp -r ----------------------------------------------------------------------
creq="$req"
cdir=$work/copy
for ((r = 1; r <= R; r++)); do
  rm -rf "$cdir"; sync
  timed cp cp -r "$root" "$cdir"
  rm -rf "$cdir"; sync
  # the same made durable, as convert makes what it writes: cp -r, then fsync of every file and
  # directory (coreutils `sync FILE...`)
  timed cp.sync sh -c 'cp -r "$1" "$2" && sync "$2" "$2"/* "$2"/*/*' sh "$root" "$cdir"
  sync
  config "$cdir" "$work/copy.yaml"
  timed convert "$fs" --config "$work/copy.yaml" convert "$creq" --to fieldstore --grace 0
  # the copy is now in fieldstore's format and holds what FDB5's listing and read gave
  "$fs" --config "$work/copy.yaml" where --show-format "$creq" > "$work/where"
  [ "$(grep -c $'\tfieldstore$' "$work/where")" = "$(wc -l < "$work/where")" ] || { cat "$work/where" >&2; fail "convert: a database is not in fieldstore's format"; }
  "$fs" --config "$work/copy.yaml" list "$creq" --porcelain > "$work/converted.list"
  cmp -s <(sort "$work/out.list.fdb5") <(sort "$work/converted.list") || fail "convert: the converted store lists other fields than FDB5's"
  "$fs" --config "$work/copy.yaml" read "$work/one.req" "$work/one.converted" 2>/dev/null
  cmp -s "$work/one.fdb5" "$work/one.converted" || fail "convert: the field read from the converted store differs"
done
# what the conversion left: visible indexes (fieldstore's flushes compact size-tiered) and index files
conv_indexes=$("$fs" --config "$work/copy.yaml" stats "$creq" | sed -n 's/.*index files \([0-9]*\),.*/\1/p' | awk '{s += $1} END {print s}')
conv_files=$(find "$cdir" -name '*.idx' | wc -l)
timed floor.data cat "$cdir"/*/*.data
rm -rf "$cdir"
if [ "$quick" = 0 ]; then
  sync; cp -r "$root" "$cdir"; sync
  timed convert.grace "$fs" --config "$work/copy.yaml" convert "$creq" --to fieldstore
  rm -rf "$cdir"
fi
toc_sums | cmp -s - "$work/store.md5" || fail "the FDB5 store changed during the run"
converted_dbs=$(wc -l < "$work/where")

# --- Report -------------------------------------------------------------------------------------
rss() { sort -n "$work/$1.rss" | tail -1 | awk '{printf "%.0f", $1 / 1024}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {r = a / b; if (r >= 1) printf "%.1f", r; else printf "%.3f", r}'; }
bar() { if [ "$quick" = 1 ]; then echo "-"; elif [ "$(echo "$1 >= $2" | bc)" = 1 ]; then echo "met (>= $2)"; else echo "**missed** (>= $2)"; fi; }
indexes=$(grep -c . "$store/archive-seconds")
size=$(du -sm "$root" | cut -f1)
idx_size=$(cat "$root"/*/toc "$root"/*/*.index | wc -c)
data_size=$(cat "$root"/*/*.data | wc -c)
echo "| workload ($fields fields by FDB5 5.10.8: $converted_dbs databases, $indexes indexes each) | FDB5 median s (min-max) | peak RSS MiB | fieldstore median s (min-max) | peak RSS MiB | FDB5 / fieldstore | bar |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
if [ -z "$only" ]; then
read -r fm fmin fmax <<<"$(stats "$work/list.fdb5")"
for s in fs name; do
  read -r om omin omax <<<"$(stats "$work/list.$s")"
  r=$(ratio "$fm" "$om")
  if [ $s = fs ]; then what="\`fieldstore list $req --porcelain\`"; else what="fieldstore's \`fdb-list $req --porcelain\`"; fi
  echo "| list: \`fdb-list $req --porcelain\` vs $what ($R runs) | $fm ($fmin-$fmax) | $(rss list.fdb5) | $om ($omin-$omax) | $(rss list.$s) | ${r}x | $(bar "$r" 10) |"
done
read -r lf _ _ <<<"$(stats "$work/loc.fdb5")"; read -r ln _ _ <<<"$(stats "$work/loc.name")"
echo "| list --location (1 run each): \`fdb-list\` vs fieldstore's \`fdb-list\` | $lf | $(rss loc.fdb5) | $ln | $(rss loc.name) | $(ratio "$lf" "$ln")x | - |"
read -r xm xmin xmax <<<"$(hfstat "$work/hf.axes.json" fs)"
read -r nm nmin nmax <<<"$(hfstat "$work/hf.axes.json" name)"
if [ -n "$fdb525" ]; then
  read -r am amin amax <<<"$(hfstat "$work/hf.axes.json" fdb525)"
  echo "| axes: FDB5 **5.25**'s \`fdb-axes $req\` vs \`fieldstore axes\` (hyperfine, $axruns runs) | $am ($amin-$amax) | - | $xm ($xmin-$xmax) | - | $(ratio "$am" "$xm")x | - |"
  echo "| axes: FDB5 5.25's \`fdb-axes\` vs fieldstore's \`fdb-axes\` | $am ($amin-$amax) | - | $nm ($nmin-$nmax) | - | $(ratio "$am" "$nm")x | - |"
else
  echo "| axes: \`fieldstore axes $req\` / fieldstore's \`fdb-axes\` (no FDB5 5.25 here; 5.10.8 has no fdb-axes) | - | - | $xm ($xmin-$xmax) / $nm | - | - | - |"
fi
read -r fm fmin fmax <<<"$(hfstat "$work/hf.read.json" fdb5)"
for s in fs name; do
  read -r om omin omax <<<"$(hfstat "$work/hf.read.json" $s)"
  r=$(ratio "$fm" "$om")
  if [ $s = fs ]; then what="\`fieldstore read REQ out\`"; else what="fieldstore's \`fdb-read REQ out\`"; fi
  echo "| one field, new process: \`fdb-read REQ out\` vs $what (hyperfine -N, $runs runs) | $fm ($fmin-$fmax) | - | $om ($omin-$omax) | - | ${r}x | $(bar "$r" 10) |"
done
fi  # not --only
read -r cm cmin cmax <<<"$(stats "$work/cp")"
read -r om omin omax <<<"$(stats "$work/convert")"
r=$(ratio "$cm" "$om")
echo "| \`cp -r\` of the store (machine) vs \`fieldstore convert $req --to fieldstore --grace 0\` of a copy (speed relative to cp); warm ($R runs) | $cm ($cmin-$cmax) | $(rss cp) | $om ($omin-$omax) | $(rss convert) | ${r}x | $(bar "$r" 0.8) |"
read -r sm smin smax <<<"$(stats "$work/cp.sync")"
echo "| \`cp -r\` + fsync of every file (machine) vs the same convert | $sm ($smin-$smax) | $(rss cp.sync) | $om ($omin-$omax) | $(rss convert) | $(ratio "$sm" "$om")x | - |"
if [ "$quick" = 0 ]; then
  read -r gm _ _ <<<"$(stats "$work/convert.grace")"
  echo "| same, convert with the default --grace 2 (1 run) | $cm | - | $gm | $(rss convert.grace) | $(ratio "$cm" "$gm")x | - |"
fi
echo
read -r dm _ _ <<<"$(stats "$work/floor.data")"
if [ "$only" = convert ]; then
  echo "Machine, same run: \`cat\` of the data files ($((data_size / 1048576)) MiB) $dm s (warm). Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "Store: $fields fields ($size MiB on disk), written by $indexes \`fdb-write\` runs of FDB5 $fdb5_version (cached in $store). Agreement: every converted copy lists the same $(wc -l < "$work/out.list.fdb5") fields as FDB5's \`fdb-list\` and reads the same bytes as its \`fdb-read\` (after conversion: $conv_indexes visible indexes, $conv_files index files, for $((indexes * converted_dbs)) FDB5 indexes); the FDB5 store's tocs and indexes are unchanged at the end."
  exit 0
fi
read -r pm pmin pmax <<<"$(hfstat "$work/hf.read.json" floor)"
read -r im _ _ <<<"$(stats "$work/floor.list")"
echo "Machine, same run: a new process copying the field (\`cp\`, hyperfine) $pm s ($pmin-$pmax); \`cat\` of the tocs and index files ($((idx_size / 1048576)) MiB) $im s; \`cat\` of the data files ($((data_size / 1048576)) MiB) $dm s (all warm)."
echo
echo "Store: $fields fields ($size MiB on disk), written by $indexes \`fdb-write\` runs of FDB5 $fdb5_version (flat layout, FDB_DBNAMES_FILE=/nonexistent; $archive_s s of archiving in all, once, cached in $store). Agreement: fieldstore's \`fdb-list\` output (also with --location) is FDB5's byte for byte; \`fieldstore list\` holds the same $listed lines ($fs_list_same); fieldstore's axes are the values in FDB5's listing$([ -n "$fdb525" ] && echo ", and its \`fdb-axes\` output is 5.25's byte for byte"); the field read is the same $(stat -c %s "$work/one.fdb5") bytes from all three; every converted copy lists the same fields and reads the same bytes (after conversion: $conv_indexes visible indexes, $conv_files index files, for $((indexes * converted_dbs)) FDB5 indexes); the FDB5 store's tocs and indexes are unchanged at the end."

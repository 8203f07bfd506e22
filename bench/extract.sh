#!/usr/bin/env bash
# Extraction (issue 30): one point over STEPS steps of 0.1° fields (regular lat-lon 3600 x 1801 =
# 6,483,600 points, 16 bits per value, simple packing ~13 MB and CCSDS ~5 MB a field), and a box
# of 10,000 points (100 x 100), in the same run:
#   - fieldstore's extract (its `pygribjump`, and `fieldstore.FDB.extract` under it) against a
#     retrieve plus a full ecCodes decode (pyfdb 5.25 from FDB5, then codes_get_values of every
#     field; bar >= 50x), and against GribJump on FDB5 over the same data (ECMWF's pygribjump
#     0.13 + gribjumplib, FDB5 written by pyfdb with GribJump's archive plugin; bar >= 2x). The
#     bars are on the point; the box is reported with the same ratios;
#   - each in one process per side (bench/extract/bench.py, run once in target/py-venv-gribjump,
#     once in our virtualenv): REPEATS timed calls after one untimed warm-up, the median per
#     call; one call = all STEPS fields of one packing (one ExtractionRequest per field, the grid
#     hash given, as Polytope does); the decode baseline gets at most 3 calls (a call is seconds);
#   - the same through a server (`fieldstore server`, a `type: remote` config) and on MinIO
#     (scripts/minio, data on /dev/shm): the Python calls again, and the CLI in a new process
#     (`fieldstore extract REQ --point LAT,LON --json`, and `--box N/W/S/E`; hyperfine -N), locally
#     too; bytes read (`bytes_read` of the CLI's --json, summed over the fields) against the whole
#     fields' bytes;
#   - every method's values are checked equal (md5 of the float64 values, bit for bit) to ecCodes'
#     full decode on FDB5, and the CLI's point values to it too; any difference stops the script.
# The data (GRIB made with ecCodes by bench/extract/bench.py gen, python/tests/gribjump/gjdata.py's
# fields; FDB5 + GribJump and fieldstore toc stores of it) is made once (~2 minutes for 48 steps
# here, 870 MB of GRIB, 2.5 GB in all) and kept in ${BENCH_CACHE:-~/.cache/fieldstore}/bench-extract/VERSION.
#
# Usage: bench/extract.sh [STEPS=48] [REPEATS=5]
#        bench/extract.sh --quick   (bench/run-all --quick: 4 steps, 1 repeat; checks that values
#            agree, fails if not; prints the table without bars)
#        bench/extract.sh --build-only [STEPS]   (only make the cached data)
# Environment: GRIBJUMP_PYTHON (target/py-venv-gribjump/bin/python: scripts/gribjump-install
# makes it), OURS_PYTHON (target/py-venv/bin/python, with scripts/python-install run in it),
# FIELDSTORE_BIN (measure this binary instead of building target/release/fieldstore),
# MINIO_DIR (/dev/shm), SKIP_S3=1 (no MinIO rows), BENCH_OUT (a directory to keep the raw JSON in).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0 build_only=0
if [ "${1:-}" = "--quick" ]; then quick=1; shift; fi
if [ "${1:-}" = "--build-only" ]; then build_only=1; shift; fi
if [ "$quick" = 1 ]; then STEPS=4 R=1; else STEPS=${1:-48} R=${2:-5}; fi
. bench/lib.sh
bench_setup

ref_py=${GRIBJUMP_PYTHON:-$PWD/target/py-venv-gribjump/bin/python}
if [ -z "${GRIBJUMP_PYTHON:-}" ]; then scripts/gribjump-install >/dev/null; fi
ours_py=${OURS_PYTHON:-$PWD/target/py-venv/bin/python}
[ -x "$ours_py" ] || { echo "no $ours_py: python3 -m venv target/py-venv && . target/py-venv/bin/activate && scripts/python-install" >&2; exit 1; }
"$ours_py" -c 'import pygribjump, fieldstore; assert pygribjump.library_version().startswith("fieldstore"); fieldstore.FDB.extract' \
  || { echo "$ours_py has no fieldstore pygribjump with FDB.extract (scripts/python-install)" >&2; exit 1; }
"$ref_py" -c 'import pygribjump, gribjumplib, pyfdb, eccodes' || { echo "$ref_py: no GribJump stack (scripts/gribjump-install)" >&2; exit 1; }
bpy=$PWD/bench/extract/bench.py
gjtests=$PWD/python/tests/gribjump
fail() { echo "DISAGREE: $*" >&2; exit 1; }
# an environment without any FDB or GribJump variable, then the ones given
clean_env() { env $(env | sed -n 's/^\(FDB[A-Z0-9_]*\|GRIBJUMP[A-Z0-9_]*\)=.*/-u \1/p') "$@"; }

# --- The data ----------------------------------------------------------------------------------
pyfdb_version=$("$ref_py" -m pip --disable-pip-version-check show pyfdb 2>/dev/null | sed -n 's/^Version: //p')
gj_version=$("$ref_py" -m pip --disable-pip-version-check show gribjumplib 2>/dev/null | sed -n 's/^Version: //p')
version="v1-0.1deg-pyfdb${pyfdb_version}-gribjump${gj_version}"
family=${BENCH_CACHE:-$HOME/.cache/fieldstore}/bench-extract/${STEPS}steps
store=$family/$version
# FDB5's config and schema are written for each run (the roots are absolute paths, kept in place)
write_configs() {   # DIR: the store's directory
  local d=$1
  mkdir -p "$work/fdb5-home/etc/fdb"
  cp "$d/schema" "$work/fdb5-home/etc/fdb/schema"
  printf 'type: local\nengine: toc\nschema: %s\nspaces:\n- handler: Default\n  roots:\n  - path: %s\n' \
    "$work/fdb5-home/etc/fdb/schema" "$d/fdb5-root" > "$work/fdb5-home/etc/fdb/config.yaml"
  printf 'type: local\nengine: toc\nschema: %s\nspaces:\n- handler: Default\n  roots:\n  - path: %s\n' \
    "$d/schema" "$d/fs-root" > "$work/local.yaml"
  printf 'plugin:\n  select: "expver=(xxxx)"\n' > "$work/gribjump.yaml"
}
if [ ! -e "$store/.complete" ]; then
  echo "making the data: $STEPS steps of 0.1° fields, simple and CCSDS (once; cached in $store)" >&2
  for old in "$family"/*; do   # other versions (a build of this one in progress is kept)
    [ -e "$old" ] && [ "$old" != "$store" ] && [ "$old" != "$store.building" ] && rm -rf "$old"
  done
  mkdir -p "$store"
  t0=$(now)
  [ -s "$store/meta.json" ] || "$ref_py" "$bpy" gen "$store" "$STEPS"
  [ -s "$store/meta.json" ] || { [ -s "$store.building/meta.json" ] && mv "$store.building"/* "$store"/; }
  (cd "$gjtests" && "$ref_py" -c 'import gjdata, sys; open(sys.argv[1], "w").write(gjdata.SCHEMA)' "$store/schema")
  rm -rf "$store/fdb5-root" "$store/fs-root"; mkdir -p "$store/fdb5-root" "$store/fs-root"
  write_configs "$store"
  t1=$(now)
  clean_env FDB_HOME="$work/fdb5-home" GRIBJUMP_CONFIG_FILE="$work/gribjump.yaml" FDB_ENABLE_GRIBJUMP=1 \
    "$ref_py" "$gjtests/reference.py" archive "$store/data.grib"
  ls "$store"/fdb5-root/*/*.gribjump >/dev/null 2>&1 || { echo "the GribJump plugin wrote no index" >&2; exit 1; }
  t2=$(now)
  "$fs" --config "$work/local.yaml" write "$store/data.grib" >/dev/null
  t3=$(now)
  printf 'made in %.0f s; archived: FDB5 + GribJump %.0f s, fieldstore %.0f s\n' \
    "$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t1" | bc)" "$(echo "$t3 - $t2" | bc)" | tee "$store/build.log" >&2
  touch "$store/.complete"
fi
[ "$build_only" = 1 ] && { echo "the data is in $store"; exit 0; }
write_configs "$store"
meta=$store/meta.json
mget() { "$ours_py" -c 'import json, sys; m = json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, m))' "$meta" "$1"; }
points=$(mget points_per_field)
point=$(mget '"%s,%s" % tuple(point)')
box=$(mget '"/".join("%g" % x for x in box_degrees)')
steps_list=$(seq -s/ 0 $((STEPS - 1)))
req_of() { echo "retrieve,class=rd,expver=xxxx,stream=oper,date=20240102,time=0000,domain=g,type=fc,levtype=sfc,step=$steps_list,param=$1"; }
echo "data: $STEPS steps x 2 packings of $points-point fields ($(du -sh "$store/data.grib" | cut -f1) of GRIB), $store" >&2

# --- Python, local -----------------------------------------------------------------------------
ours_env() { clean_env FDB_CONFIG_FILE="$1" GRIBJUMP_CONFIG_FILE="$work/gribjump.yaml" "${@:2}"; }
echo "GribJump on FDB5, and pyfdb retrieve + ecCodes decode ($ref_py):" >&2
clean_env FDB_HOME="$work/fdb5-home" GRIBJUMP_CONFIG_FILE="$work/gribjump.yaml" \
  "$ref_py" "$bpy" run ref "$meta" "$work/ref.json" "$R" > "$work/ref.stdout"   # GribJump talks on stdout
echo "fieldstore, local ($ours_py):" >&2
ours_env "$work/local.yaml" "$ours_py" "$bpy" run ours "$meta" "$work/local.json" "$R"

# --- A server ------------------------------------------------------------------------------------
"$fs" --config "$work/local.yaml" server --listen 127.0.0.1:0 > "$work/server.out" 2> "$work/server.log" &
server_pid=$!
s3_dir=""
cleanup() {
  [ -z "${server_pid:-}" ] || kill -TERM "$server_pid" 2>/dev/null || true
  [ -z "$s3_dir" ] || { scripts/minio stop "$s3_dir" >/dev/null 2>&1 || true; rm -rf "$s3_dir"; }
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 1 100); do grep -q listening "$work/server.out" && break; sleep 0.05; done
port=$(sed -n 's/^listening on .*://p' "$work/server.out")
[ -n "$port" ] || { cat "$work/server.log" >&2; echo "the server did not start" >&2; exit 1; }
printf 'type: remote\nhost: 127.0.0.1\nport: %s\n' "$port" > "$work/remote.yaml"
echo "fieldstore through a server (127.0.0.1:$port):" >&2
ours_env "$work/remote.yaml" "$ours_py" "$bpy" run ours "$meta" "$work/remote.json" "$R"

# --- MinIO ---------------------------------------------------------------------------------------
configs="local remote"
if [ "${SKIP_S3:-0}" != 1 ]; then
  scripts/minio install >/dev/null
  s3_dir=$(mktemp -d -p "${MINIO_DIR:-/dev/shm}")
  minio_start "$s3_dir"
  printf 'type: local\nengine: s3\nstore: s3\nschema: %s\ns3:\n  endpoint: %s\n  bucket: extract\n  region: us-east-1\n' \
    "$store/schema" "$endpoint" > "$work/s3.yaml"
  t0=$(now)
  "$fs" --config "$work/s3.yaml" write "$store/data.grib" >/dev/null
  printf 'MinIO at %s (data in %s, %s): written in %.0f s\n' "$endpoint" "$s3_dir" \
    "$(df --output=fstype "$s3_dir" | tail -1)" "$(echo "$(now) - $t0" | bc)" >&2
  echo "fieldstore on MinIO:" >&2
  ours_env "$work/s3.yaml" "$ours_py" "$bpy" run ours "$meta" "$work/s3.json" "$R"
  configs="local remote s3"
fi

# --- The CLI, a new process ----------------------------------------------------------------------
runs=$((R < 2 ? 2 : R * 2))
for cfg in $configs; do
  for packing in simple ccsds; do
    param=$(mget "packings['$packing']")
    for sel in point box; do
      if [ $sel = point ]; then arg=(--point "$point"); else arg=(--box "$box"); fi
      "$fs" --config "$work/$cfg.yaml" extract "$(req_of "$param")" "${arg[@]}" --json > "$work/cli-$cfg-$packing-$sel.json" \
        || fail "fieldstore extract ($cfg, $packing, $sel) failed"
      hyperfine -N --warmup 1 --runs "$runs" --export-json "$work/hf-$cfg-$packing-$sel.json" \
        "$fs --config $work/$cfg.yaml extract $(req_of "$param") ${arg[*]} --json" > /dev/null 2>&1 \
        || fail "hyperfine of fieldstore extract ($cfg, $packing, $sel) failed"
    done
  done
done

# --- Checks and the table --------------------------------------------------------------------------
if [ -n "${BENCH_OUT:-}" ]; then mkdir -p "$BENCH_OUT" && cp "$work"/*.json "$BENCH_OUT"/; fi   # the raw results
"$ours_py" "$PWD/bench/extract/table.py" "$work" "$meta" "$STEPS" "$R" "$quick" "$configs"

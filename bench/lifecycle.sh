#!/usr/bin/env bash
# Issue 33's benchmark: `fieldstore move` of a database from a root to a bucket (a local MinIO)
# against a plain copy of the same bytes to the same server (the database directory's files, a
# PUT each, or 16 MiB parts 4 in flight: what `mc cp --recursive` does; bench's s3bench example
# `copy`, on the same HTTP stack; both timed as whole commands). One database of small fields and one of large fields; each
# measured R times on a fresh root and prefix; medians (min-max). The bar: move >= 80 % of the
# copy's speed.
#
# A move also reads every field through the catalogue (checking its CRC-32C), commits one
# catalogue marker and compares the new copy's entries with the old's. It returns once the
# bucket's copy is the one: the old root copy's retirement (hidden 1 s after the switch, deleted
# after --grace) is left to a later move or lifecycle run (docs/lifecycle.md), so it is not in
# the time; the script checks after each move that every field is listed once.
# Usage: [MINIO_DIR=/dev/shm] [POINTS=1000] [POINTS_LARGE=2000000]
#        bench/lifecycle.sh [SMALL_FIELDS≈10000] [LARGE_FIELDS≈40] [REPEATS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
SMALL=${1:-10000}
LARGE=${2:-40}
R=${3:-3}
base=${MINIO_DIR:-/dev/shm}
. bench/lib.sh
bench_setup "$base"
cargo build --release -q -p fieldstore --example s3bench
cp target/release/examples/s3bench "$work/s3bench"
sb=$work/s3bench
minio_dir=$(mktemp -d -p "$base")
trap 'scripts/minio stop "$minio_dir" >/dev/null 2>&1 || true; rm -rf "$minio_dir" "$work"' EXIT
minio_start "$minio_dir"
fstype=$(df --output=fstype "$minio_dir" | tail -1)
echo "MinIO $(scripts/minio path) at $endpoint, data in $minio_dir ($fstype); the root beside it"
echo

# cfg ROOT PREFIX: a root, then the bucket tier under PREFIX.
cfg() { printf 'type: local\nspaces:\n- roots:\n  - {path: %s}\n  - {path: "s3://fields/%s"}\ns3: {endpoint: %s, grace: 2s}\n' "$1" "$2" "$endpoint"; }

corpus() { # NAME FIELDS POINTS
  local steps=$(( ($2 + 3) / 4 ))
  "$fs" sample --out "$work/$1.grib" --params t/u --levels 1000/500 --steps "$(seq -s/ 0 $((steps - 1)))" \
    --points "$3" 2>/dev/null
}

db=class=od,expver=0001,stream=oper,date=20261122,time=1200

measure() { # NAME
  local name=$1 r root
  for r in $(seq 1 "$R"); do
    root=$(mktemp -d -p "$base")
    cfg "$root" "move-$name-$r" > "$work/fdb.yaml"
    "$fs" --config "$work/fdb.yaml" write "$work/$name.grib" >/dev/null 2>&1
    sync
    # The plain copy of the database's files first (page cache warm for both).
    # Timed as a whole command (start, connect, upload), as the move is.
    t0=$(now)
    "$sb" copy "$endpoint" fields "copy-$name-$r/" "$root"/od:0001:oper:20261122:1200:g > "$work/copy.out"
    echo "$(now) - $t0" | bc >> "$work/$name.copy"
    sed -n 's/^copy: [0-9]* files, \([0-9]*\) bytes.*/\1/p' "$work/copy.out" > "$work/$name.bytes"
    timed_move "$work/$name.move" "$fs" --config "$work/fdb.yaml" move "$db" --to "s3://fields/move-$name-$r" --grace 0
    n=$("$fs" --config "$work/fdb.yaml" list class=od --porcelain | wc -l)
    [ "$n" = "$(cat "$work/$name.n")" ] || { echo "$name: $n fields listed after the move" >&2; exit 1; }
    rm -rf "$root"
  done
}

timed_move() { local f=$1 t0; shift; t0=$(now); "$@" >/dev/null 2>"$work/last.err" || { cat "$work/last.err" >&2; exit 1; }; echo "$(now) - $t0" | bc >> "$f"; }

row() { # NAME LABEL
  local name=$1 bytes mib copy move
  bytes=$(cat "$work/$name.bytes")
  mib=$(echo "scale=3; $bytes / 1048576" | bc)
  read -r copy cmin cmax <<< "$(stats "$work/$name.copy")"
  read -r move mmin mmax <<< "$(stats "$work/$name.move")"
  printf '| %s: %s fields, %.1f MiB | %.3f s (%.3f-%.3f), %.0f MiB/s | %.3f s (%.3f-%.3f), %.0f MiB/s | %.0f %% |\n' \
    "$2" "$(cat "$work/$name.n")" "$mib" "$copy" "$cmin" "$cmax" "$(echo "$mib / $copy" | bc -l)" \
    "$move" "$mmin" "$mmax" "$(echo "$mib / $move" | bc -l)" \
    "$(echo "100 * $copy / $move" | bc -l)"
}

corpus small "$SMALL" "${POINTS:-1000}"
corpus large "$LARGE" "${POINTS_LARGE:-2000000}"
# Fields per corpus, counted by writing once to a scratch root.
for n in small large; do
  root=$(mktemp -d -p "$base")
  printf 'type: local\nspaces: [{roots: [{path: %s}]}]\n' "$root" > "$work/count.yaml"
  "$fs" --config "$work/count.yaml" write "$work/$n.grib" >/dev/null 2>&1
  "$fs" --config "$work/count.yaml" list class=od --porcelain | wc -l > "$work/$n.n"
  rm -rf "$root"
done
measure small
measure large
echo "| database | plain copy of its files to MinIO (s3bench copy) | fieldstore move root -> bucket | move / copy |"
echo "|---|---|---|---|"
row small "small fields"
row large "large fields"

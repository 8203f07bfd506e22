#!/usr/bin/env bash
# fieldstore on S3 (a local MinIO), in one run: archive+flush and retrieve of small and of large
# fields against the plain PUT/GET loop of the same server (one object per field, one thread, the
# same HTTP stack: bench's s3bench example on storage::s3::S3Client) and against the local toc
# store; freshness (flush returned in a writer process -> field listed by another process); and
# the DAOS patterns (hammer --pattern 0A/0B/1/2B) on S3. Each archive/retrieve is repeated on a
# fresh prefix/root; medians (min-max).
# Usage: [MINIO_DIR=/dev/shm] [POINTS=1000] [POINTS_LARGE=5000000] [PROCESSES=4]
#        bench/s3/run.sh [SMALL_FIELDS≈10000] [LARGE_FIELDS≈40] [REPEATS=3] [FLUSHES=200]
# MINIO_DIR: where MinIO keeps its data (default /dev/shm: tmpfs, so the server's disk is not
# what is measured; the toc store is on the same kind of filesystem, $MINIO_DIR too).
set -euo pipefail
cd "$(dirname "$0")/../.."
SMALL=${1:-10000}
LARGE=${2:-40}
R=${3:-3}
FLUSHES=${4:-200}
P=${PROCESSES:-4}
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
echo "MinIO $(scripts/minio path) at $endpoint, data in $minio_dir ($fstype); toc roots beside it"
echo

# s3cfg PREFIX: a config for catalogue and store on the MinIO, under PREFIX.
s3cfg() { printf 'type: local\nengine: s3\nstore: s3\ns3: {endpoint: %s, bucket: fields, prefix: %s, grace: 2s}\n' "$endpoint" "$1"; }
tocfg() { printf 'type: local\nspaces: [{roots: [{path: %s}]}]\n' "$1"; }

# Corpus: oper fc, params t/u on levels 1000/500 (4 fields a step), steps to reach about N fields.
corpus() { # NAME FIELDS POINTS
  local steps=$(( ($2 + 3) / 4 ))
  "$fs" sample --out "$work/$1.grib" --params t/u --levels 1000/500 --steps "$(seq -s/ 0 $((steps - 1)))" \
    --points "$3" 2>/dev/null
  echo "retrieve,class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,levelist=1000/500,param=130/131,step=0/to/$((steps - 1))/by/1" > "$work/$1.req"
}

# timed FILE COMMAND...: appends the elapsed seconds to FILE.
timed() { local f=$1 t0; shift; t0=$(now); "$@" >/dev/null 2>"$work/last.err" || { cat "$work/last.err" >&2; exit 1; }; echo "$(now) - $t0" | bc >> "$f"; }

# measure NAME: archive and retrieve NAME.grib on s3 and toc, and the PUT/GET loop, R times.
measure() {
  local name=$1 r
  for r in $(seq 1 "$R"); do
    s3cfg "$name-$r/" > "$work/s3.yaml"
    timed "$work/$name.write.s3" "$fs" --config "$work/s3.yaml" write "$work/$name.grib"
    # Timed into /dev/null, as the loop's GETs land in memory and are dropped; then checked.
    timed "$work/$name.read.s3" "$fs" --config "$work/s3.yaml" read "$work/$name.req" /dev/null
    "$fs" --config "$work/s3.yaml" read "$work/$name.req" "$work/out" 2>/dev/null
    cmp -s <(stat -c %s "$work/out") <(stat -c %s "$work/$name.grib") || { echo "$name: s3 retrieve size differs" >&2; exit 1; }
    rm -f "$work/out"
    tocfg "$work/root-$name-$r" > "$work/toc.yaml"
    sync
    timed "$work/$name.write.toc" "$fs" --config "$work/toc.yaml" write "$work/$name.grib"
    timed "$work/$name.read.toc" "$fs" --config "$work/toc.yaml" read "$work/$name.req" /dev/null
    rm -rf "$work/out" "$work/root-$name-$r"
    "$sb" limit "$endpoint" fields "limit-$name-$r/" "$work/$name.grib" 1 > "$work/limit.out"
    sed -n 's/^limit put: .*, \([0-9.]*\) s, .*/\1/p' "$work/limit.out" >> "$work/$name.write.limit"
    sed -n 's/^limit get: .*, \([0-9.]*\) s, .*/\1/p' "$work/limit.out" >> "$work/$name.read.limit"
  done
}

# table NAME FIELDS BYTES: fields/s and MiB/s from the medians.
table() {
  local name=$1 n=$2 bytes=$3 op sys
  echo "| $name: $n fields of $((bytes / n)) B | S3 plain PUT/GET loop | fieldstore on S3 | fieldstore on toc | S3 / loop |"
  echo "| --- | --- | --- | --- | --- |"
  for op in write read; do
    local row="" med=()
    for sys in limit s3 toc; do
      read -r m lo hi <<<"$(stats "$work/$name.$op.$sys")"
      med+=("$m")
      row+=" $(echo "$n / $m" | bc) fields/s, $(echo "scale=1; $bytes / 1048576 / $m" | bc) MiB/s ($m s, $lo-$hi) |"
    done
    local label="archive+flush"; [ $op = read ] && label="retrieve all"
    echo "| $label |$row $(echo "scale=2; ${med[0]} / ${med[1]}" | bc)x |"
  done
  echo
}

corpus small "$SMALL" "${POINTS:-1000}"
corpus large "$LARGE" "${POINTS_LARGE:-5000000}"
measure small
measure large
table small "$(( ($SMALL + 3) / 4 * 4 ))" "$(stat -c %s "$work/small.grib")"
table large "$(( ($LARGE + 3) / 4 * 4 ))" "$(stat -c %s "$work/large.grib")"

# The same small archive through the library with the keys known (as a model writing through
# the API does: no GRIB decoding), one flush: hammer --mode write. Fields/s of archive+flush.
hsteps=$(( (SMALL + 39) / 40 ))
for r in $(seq 1 "$R"); do
  s3cfg "keys-$r/" > "$work/s3.yaml"
  tocfg "$work/root-keys-$r" > "$work/toc.yaml"
  for sys in s3 toc; do
    "$fs" --config "$work/$sys.yaml" hammer --mode write --steps "$hsteps" --levels 10 --params 4 \
      --points "${POINTS:-1000}" --flush-every 0 --json > "$work/hk.json"
    jq -r '.fields / ([.phases[].wall_s] | max)' "$work/hk.json" >> "$work/keys.$sys"
  done
  rm -rf "$work/root-keys-$r"
done
loop=$(stats "$work/small.write.limit" | cut -d' ' -f1)
read -r ks _ <<<"$(stats "$work/keys.s3")"
read -r kt _ <<<"$(stats "$work/keys.toc")"
loopfs=$(echo "$(( hsteps * 40 )) / $loop" | bc)
echo "| small, keys known: $((hsteps * 40)) fields, one flush (hammer --mode write) | S3 plain PUT loop | fieldstore on S3 | fieldstore on toc | S3 / loop |"
echo "| --- | --- | --- | --- | --- |"
echo "| archive+flush, fields/s (median of $R) | $loopfs | ${ks%.*} | ${kt%.*} | $(echo "scale=1; $ks / $loopfs" | bc)x |"
echo

# Freshness: one field a flush, steps 0..FLUSHES-1, expver frsh.
"$fs" sample --out "$work/fresh.grib" --params t --levels 1000 --expver frsh --steps "$(seq -s/ 0 $((FLUSHES - 1)))" --points 1000 2>/dev/null
s3cfg "fresh/" > "$work/s3.yaml"
tocfg "$work/root-fresh" > "$work/toc.yaml"
echo "| freshness: flush() returned in a writer process -> listed by a reader process polling list | |"
echo "| --- | --- |"
echo "| S3 | $("$sb" freshness "$work/s3.yaml" "$work/fresh.grib" "$FLUSHES" | sed 's/^freshness: //') |"
echo "| toc | $("$sb" freshness "$work/toc.yaml" "$work/fresh.grib" "$FLUSHES" | sed 's/^freshness: //') |"
echo

# The DAOS field-I/O patterns, on S3 and on toc, $P processes.
echo "| hammer pattern ($P processes) | phase | S3 fields/s | S3 p50 / p99 ms | toc fields/s | toc p50 / p99 ms |"
echo "| --- | --- | --- | --- | --- | --- |"
for pat in 0A 0B 1 2B; do
  s3cfg "hammer-$pat/" > "$work/s3.yaml"
  tocfg "$work/root-hammer-$pat" > "$work/toc.yaml"
  extra=(--steps 4 --levels 4 --params 4)
  case $pat in 0A|0B) extra+=(--iterations 20) ;; 2B) extra+=(--iterations 3) ;; esac
  "$fs" --config "$work/s3.yaml" hammer --pattern "$pat" --processes "$P" "${extra[@]}" --json > "$work/h.s3"
  "$fs" --config "$work/toc.yaml" hammer --pattern "$pat" --processes "$P" "${extra[@]}" --json > "$work/h.toc"
  jq -r --slurpfile t "$work/h.toc" '.phases as $s | range(0; $s | length) as $i |
    [$s[$i].name, ($s[$i].fields_per_s // (($s[$i].ops) / $s[$i].wall_s) | floor),
     "\($s[$i].latency_us.p50 / 1000 * 10 | round / 10) / \($s[$i].latency_us.p99 / 1000 * 10 | round / 10)",
     ($t[0].phases[$i].fields_per_s // (($t[0].phases[$i].ops) / $t[0].phases[$i].wall_s) | floor),
     "\($t[0].phases[$i].latency_us.p50 / 1000 * 10 | round / 10) / \($t[0].phases[$i].latency_us.p99 / 1000 * 10 | round / 10)"]
    | "| '"$pat"' | \(.[0]) | \(.[1]) | \(.[2]) | \(.[3]) | \(.[4]) |"' "$work/h.s3"
done
echo
echo "(flush phases: flushes/s. $("$sb" count "$endpoint" fields "" | sed 's/^/bucket at the end: /'))"

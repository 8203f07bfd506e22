#!/usr/bin/env bash
# Concurrent writers side by side with FDB5 5.10.8, in one run: the same corpus split over 1, 2, 4
# and 8 writer processes (`fdb-write` / `fieldstore write`, one file each, disjoint keys, one
# database), archive+flush until the last process ends. Each point is repeated on a fresh store;
# medians (min-max) are reported, with the machine's fsync'd write bandwidth measured in the same
# rounds (dd conv=fdatasync of the whole corpus to the same filesystem).
# Usage: [POINTS=1000] [WRITERS="1 2 4 8"] bench/concurrent.sh [FIELDS≈10000] [REPEATS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10000}
R=${2:-3}
WRITERS=${WRITERS:-1 2 4 8}
. bench/lib.sh
bench_setup

# One corpus file per step range, for every split: 4 params x 2 levels = 8 fields a step.
steps=$(( (N + 7) / 8 ))
fields=$((steps * 8))
for k in $WRITERS; do
  for i in $(seq 0 $((k - 1))); do
    lo=$((steps * i / k)); hi=$((steps * (i + 1) / k - 1))
    [ "$hi" -ge "$lo" ] || { echo "$fields fields cannot be split over $k writers" >&2; exit 1; }
    $fs sample --out "$work/c$k.$i.grib" --params t/u/v/q \
      --levels 1000/500 --steps "$(seq -s/ "$lo" "$hi")" \
      --points "${POINTS:-1000}" 2>/dev/null
  done
done
size=$(cat "$work"/c1.*.grib | wc -c)

# Busy and total CPU ticks of the whole machine, to tell when the CPUs are saturated.
ticks() { awk '/^cpu / {print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }
for r in $(seq 1 "$R"); do
  for k in $WRITERS; do
    for sys in fdb5 fieldstore; do
      root="$work/root"; rm -rf "$root"; mkdir -p "$root"
      printf 'type: local\nengine: toc\nschema: %s\nspaces: [{handler: Default, roots: [{path: %s}]}]\n' "$schema" "$root" > "$work/config.yaml"
      export FDB5_CONFIG_FILE="$work/config.yaml"
      pids=()
      sync; read -r b0 a0 <<<"$(ticks)"; t0=$(now)
      for i in $(seq 0 $((k - 1))); do
        if [ $sys = fdb5 ]; then fdb-write "$work/c$k.$i.grib" >/dev/null 2>&1 & else "$fs" write "$work/c$k.$i.grib" >/dev/null 2>&1 & fi
        pids+=($!)
      done
      for p in "${pids[@]}"; do wait "$p" || { echo "$sys writer failed ($k writers)" >&2; exit 1; }; done
      echo "$(now) - $t0" | bc >> "$work/w$k.$sys"
      read -r b1 a1 <<<"$(ticks)"; echo "100 * ($b1 - $b0) / ($a1 - $a0)" | bc >> "$work/cpu$k.$sys"
      n=$(if [ $sys = fdb5 ]; then fdb-list --all --minimum-keys= --porcelain; else "$fs" list --all --porcelain; fi | wc -l)
      [ "$n" = "$fields" ] || { echo "$sys with $k writers stored $n fields, expected $fields" >&2; exit 1; }
    done
  done
  rm -rf "$work/root"
  sync; t0=$(now); cat "$work"/c1.*.grib | dd of="$work/dd.out" bs=8M conv=fdatasync status=none
  echo "$(now) - $t0" | bc >> "$work/dd"; rm -f "$work/dd.out"
done

rate() { echo "scale=0; $1 / ($2)" | bc; }
echo "| writers ($fields fields, $((size / fields)) B each) | FDB5 median s (min-max) | FDB5 fields/s | FDB5 CPU busy | fieldstore median s (min-max) | fieldstore fields/s | fieldstore MiB/s | fieldstore CPU busy | FDB5 / fieldstore time |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for k in $WRITERS; do
  read -r fm fmin fmax <<<"$(stats "$work/w$k.fdb5")"
  read -r om omin omax <<<"$(stats "$work/w$k.fieldstore")"
  fc=$(sort -n "$work/cpu$k.fdb5" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  oc=$(sort -n "$work/cpu$k.fieldstore" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  echo "| $k | $fm ($fmin-$fmax) | $(rate "$fields" "$fm") | $fc % | $om ($omin-$omax) | $(rate "$fields" "$om") | $(rate "$size" "$om * 1048576") | $oc % | $(echo "scale=2; $fm / $om" | bc)x |"
done
dd_s=$(stats "$work/dd" | cut -d' ' -f1)
echo
echo "CPU busy: share of both cores' time spent busy (user+system+irq, from /proc/stat) during the run, whole machine."
echo "limit: the same $((size / 1048576)) MiB written with dd conv=fdatasync to the same filesystem: median $dd_s s ($(rate "$size" "$dd_s * 1048576") MiB/s); $(nproc) cores"

#!/usr/bin/env bash
# Side-by-side with FDB5 5.10.8 on this machine, in one run: archive+flush of small fields, list of
# the whole store, retrieve of everything, one-field retrieve in a new process. Each measurement is
# repeated (fresh store each time) and the median, min and max are reported, because the machine is
# shared and noisy. Usage: [POINTS=1000] [FS_BIN=path] bench/compare.sh [FIELDS≈10000] [REPEATS=3]
# (POINTS: grid points per field, 1000 ≈ 2.2 KiB, 5000000 ≈ 10 MiB; FS_BIN: measure that fieldstore
# binary instead of this checkout's, e.g. main's for a before/after.)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10000}
R=${2:-3}
. bench/lib.sh
bench_setup
[ -n "${FS_BIN:-}" ] && cp "$FS_BIN" "$fs"

# Corpus: oper fc on 10 pressure levels x 4 params, steps to reach about N fields of ~2 KiB.
steps=$(( (N + 39) / 40 ))
steplist=$(seq -s/ 0 $((steps - 1)))
$fs sample --out "$work/small.grib" --params t/u/v/q --levels 1000/925/850/700/500/400/300/250/200/100 \
  --steps "$steplist" --points "${POINTS:-1000}" 2>/dev/null
fields=$((steps * 40))
size=$(stat -c %s "$work/small.grib")
req="retrieve,class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,levelist=1000/925/850/700/500/400/300/250/200/100,param=130/131/132/133,step=0/to/$((steps - 1))/by/1"
one="retrieve,class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,levelist=500,param=130,step=$((steps / 2))"
echo "$req" > "$work/all.req"
echo "$one" > "$work/one.req"

# run NAME SYSTEM COMMAND...: appends the elapsed seconds to $work/NAME.SYSTEM. Dirty pages left by
# the previous step are written back first (untimed), so neither system pays for the other's I/O.
run() { local name=$1 sys=$2; shift 2; local t0; sync; t0=$(now); "$@" >/dev/null 2>&1; echo "$(now) - $t0" | bc >> "$work/$name.$sys"; }

for r in $(seq 1 "$R"); do
  # Alternate which system goes first, and free each system's store and output before the other
  # runs: on this VM, memory touched for the first time costs far more than recycled memory, so
  # whoever runs second on fresh pages would pay for it.
  order="fdb5 fieldstore"; [ $((r % 2)) -eq 0 ] && order="fieldstore fdb5"
  for sys in $order; do
    root="$work/root-$sys-$r"; mkdir -p "$root"
    printf 'type: local\nengine: toc\nschema: %s\nspaces: [{handler: Default, roots: [{path: %s}]}]\n' "$schema" "$root" > "$work/$sys.yaml"
    export FDB5_CONFIG_FILE="$work/$sys.yaml"
    if [ $sys = fdb5 ]; then
      run write $sys fdb-write "$work/small.grib"
      run list $sys bash -c "fdb-list --all --minimum-keys= --porcelain | wc -l"
      run readall $sys fdb-read "$work/all.req" "$work/out-$sys"
      run readone $sys fdb-read "$work/one.req" "$work/one-$sys"
    else
      run write $sys "$fs" write "$work/small.grib"
      run list $sys bash -c "$fs list --all --porcelain | wc -l"
      run readall $sys "$fs" read "$work/all.req" "$work/out-$sys"
      run readone $sys "$fs" read "$work/one.req" "$work/one-$sys"
    fi
    stat -c %s "$work/out-$sys" > "$work/size-$sys"
    rm -rf "$root" "$work/out-$sys"
  done
  cmp -s "$work/one-fdb5" "$work/one-fieldstore" || { echo "one-field retrieves differ" >&2; exit 1; }
  cmp -s "$work/size-fdb5" "$work/size-fieldstore" || { echo "retrieve sizes differ" >&2; exit 1; }
  rm -rf "$work"/root-* "$work"/out-* "$work"/one-*
  # A plain copy of the same bytes in the same round, from page cache into a new file as the
  # retrieve does (cp: copy_file_range on this filesystem): the bar for "retrieve all".
  run cp limit cp "$work/small.grib" "$work/cp.out"; rm -f "$work/cp.out"
  echo "scale=3; $(tail -1 "$work/cp.limit") / $(tail -1 "$work/readall.fieldstore")" | bc >> "$work/ratio.cp"
  # The machine's limit in the same round: the corpus copied to the same filesystem, fdatasync'd.
  sync; t0=$(now); dd if="$work/small.grib" of="$work/dd.out" bs=8M conv=fdatasync status=none
  echo "$(now) - $t0" | bc >> "$work/dd.limit"; rm -f "$work/dd.out"
  # The disk drifts from minute to minute: also compare within the round.
  echo "scale=3; $(tail -1 "$work/dd.limit") / $(tail -1 "$work/write.fieldstore")" | bc >> "$work/ratio.dd"
  # Memory copy bandwidth (mbw, memcpy of 512 MiB): the ceiling for retrieves from page cache.
  mbw -q -n 2 -t0 512 | awk '/^AVG/ {print $9}' >> "$work/memcpy.limit"
done

echo "| workload ($fields fields, $((size / fields)) B each) | FDB5 median s (min-max) | fieldstore median s (min-max) | FDB5 / fieldstore |"
echo "| --- | --- | --- | --- |"
for w in write list readall readone; do
  read -r fm fmin fmax <<<"$(stats "$work/$w.fdb5")"
  read -r om omin omax <<<"$(stats "$work/$w.fieldstore")"
  ratio=$(echo "scale=2; $fm / $om" | bc)
  case $w in write) label="archive+flush";; list) label="list whole store";; readall) label="retrieve all";; readone) label="retrieve one field (new process)";; esac
  echo "| $label | $fm ($fmin-$fmax) | $om ($omin-$omax) | ${ratio}x |"
done
dd_s=$(stats "$work/dd.limit" | cut -d' ' -f1)
echo
echo "machine limit: the same $((size / 1048576)) MiB copied with dd conv=fdatasync to the same filesystem: median $dd_s s ($(echo "$size / $dd_s / 1048576" | bc) MiB/s)"
echo "archive MiB/s as a share of dd's in the same round: median $(stats "$work/ratio.dd" | awk '{printf "%.0f %% (%.0f-%.0f %%)", $1 * 100, $2 * 100, $3 * 100}')"
echo "plain copy (cp of the corpus, same round): median $(stats "$work/cp.limit" | cut -d' ' -f1) s ($(echo "$size / $(stats "$work/cp.limit" | cut -d' ' -f1) / 1048576" | bc) MiB/s); retrieve all MiB/s as a share of cp's in the same round: median $(stats "$work/ratio.cp" | awk '{printf "%.0f %% (%.0f-%.0f %%)", $1 * 100, $2 * 100, $3 * 100}')"
echo "memcpy (mbw, 512 MiB): median $(stats "$work/memcpy.limit" | cut -d' ' -f1) MiB/s; retrieve all MiB/s: FDB5 $(echo "$size / $(stats "$work/readall.fdb5" | cut -d' ' -f1) / 1048576" | bc), fieldstore $(echo "$size / $(stats "$work/readall.fieldstore" | cut -d' ' -f1) / 1048576" | bc)"
echo "archive MiB/s: FDB5 $(echo "$size / $(stats "$work/write.fdb5" | cut -d' ' -f1) / 1048576" | bc), fieldstore $(echo "$size / $(stats "$work/write.fieldstore" | cut -d' ' -f1) / 1048576" | bc)"
echo "fields/s archive: FDB5 $(echo "$fields / $(stats "$work/write.fdb5" | cut -d' ' -f1)" | bc), fieldstore $(echo "$fields / $(stats "$work/write.fieldstore" | cut -d' ' -f1)" | bc)"

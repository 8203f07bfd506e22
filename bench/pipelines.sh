#!/usr/bin/env bash
# MultIO plans (issue 29): daily and monthly means over a month of hourly 0.25° fields, through
# fieldstore and through MultIO itself, in the same run, on the same input and the same plan file.
#   - input: hourly 2 m temperature (paramId 167, GRIB2, regular lat-lon 1440 x 721 = 1,038,240
#     points, simple packing at 16 bits: ~2 MiB a message), steps 1..DAYS*24 of a run starting on
#     2025-01-01 00 UTC, values varying with latitude, longitude, hour, day and point; made once by
#     bench/pipelines/gen.py (numpy + ecCodes' C API) and cached in
#     ${BENCH_CACHE:-~/.cache/fieldstore}/bench-pipelines/VERSION;
#   - plan: bench/pipelines/means.yaml, two plans: select 2t -> statistics (1d, average) -> print
#     -> encode raw -> file sink, and the same with 1m;
#   - MultIO: `multio-feed FILE --decode --plans=means.yaml` (PyPI multiolib 2.12, installed by
#     scripts/multio-install into target/py-venv-multio, or MULTIO_VENV); fieldstore:
#     `fieldstore pipeline run -q means.yaml FILE`. REPEATS rounds, alternating which runs first;
#     medians (min-max), peak RSS (/usr/bin/time -f %M), fields/s and MB/s of GRIB read;
#   - every round, both runs' outputs are checked equal: the same outputs with the same window
#     metadata (from the plans' print lines), every value within 1e-12 relative
#     (bench/pipelines/compare.py); any difference stops the script;
#   - the machine's floor in the same run: `cat` of the GRIB file, and ecCodes decoding every
#     message alone (bench/pipelines/decode.py: the C API through ctypes, the ecCodes fieldstore
#     links; a reused buffer);
#   - memory bounded by the open windows, not by the number of steps: both systems also run on the
#     first MEM_DAYS days (default 7) and peak RSS is reported for MEM_DAYS and DAYS.
# Bars (issue 29): fieldstore's throughput >= 2x MultIO's; fieldstore's peak RSS at DAYS no more
# than 1.25x (+16 MiB) its peak at MEM_DAYS.
#
# Usage: bench/pipelines.sh [DAYS=31] [REPEATS=3]
#        bench/pipelines.sh --quick   (bench/run-all --quick: 2 days on a 1° grid, 1 round, memory
#            run on 1 day; fails if outputs disagree; no bars)
#        bench/pipelines.sh --build-only [DAYS=31]   (only make the cached input)
# Environment: MEM_DAYS (7), MULTIO_VENV (target/py-venv-multio).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0 build_only=0
if [ "${1:-}" = "--quick" ]; then quick=1; shift; fi
if [ "${1:-}" = "--build-only" ]; then build_only=1; shift; fi
if [ "$quick" = 1 ]; then
  DAYS=2 R=1 NI=360 NJ=181 MEM_DAYS=1
else
  DAYS=${1:-31} R=${2:-3} NI=1440 NJ=721 MEM_DAYS=${MEM_DAYS:-7}
fi
[ "$MEM_DAYS" -lt "$DAYS" ] || MEM_DAYS=$((DAYS > 1 ? DAYS - 1 : 1))
. bench/lib.sh
bench_setup

# --- MultIO and ecCodes -----------------------------------------------------------------------
venv=${MULTIO_VENV:-$PWD/target/py-venv-multio}
if [ -z "${MULTIO_VENV:-}" ]; then scripts/multio-install >/dev/null; fi
site=$(ls -d "$venv"/lib/python3*/site-packages 2>/dev/null | head -1 || true)
[ -n "$site" ] && [ -x "$site/multiolib/bin/multio-feed" ] || { echo "no multio-feed in $venv (scripts/multio-install)" >&2; exit 1; }
py=$venv/bin/python
feed=$site/multiolib/bin/multio-feed
# the wheel's run path names atlaslib-ecmwf; the package installs as atlaslib_ecmwf
mlibs=$site/atlaslib_ecmwf/lib64
multio_version=$("$py" -m pip --disable-pip-version-check show multiolib 2>/dev/null | sed -n 's/^Version: //p')
# the ecCodes fieldstore loads at run time (docs/eccodes.md), so that Python uses the same one
libeccodes=$("$fs" info 2>/dev/null | awk '/^  library: / {print $2; exit}')
[ -n "$libeccodes" ] || { echo "fieldstore loads no ecCodes (fieldstore info)?" >&2; exit 1; }
eccodes_version=$(codes_info -v 2>/dev/null || echo '?')

# --- The input ----------------------------------------------------------------------------------
points=$((NI * NJ))
steps=$((DAYS * 24))
version="v1-2t-${NI}x${NJ}-16bit-${steps}h-eccodes_${eccodes_version}"
family=${BENCH_CACHE:-$HOME/.cache/fieldstore}/bench-pipelines
input=$family/$version/hourly.grib
if [ ! -e "$input.complete" ]; then
  echo "making the input: $steps hourly fields of $points points (once; cached in $family/$version)" >&2
  rm -rf "$family/$version"; mkdir -p "$family/$version"
  "$py" bench/pipelines/gen.py "$libeccodes" "$input.part" "$DAYS" "$NI" "$NJ" 2> "$work/gen.log" \
    || { cat "$work/gen.log" >&2; exit 1; }
  mv "$input.part" "$input"; touch "$input.complete"
fi
# other sizes of the input are kept (the quick run's is small); only this version's is read
[ "$build_only" = 1 ] && { echo "the input is $input"; exit 0; }
bytes=$(stat -c %s "$input")
msgs=$(grib_count "$input")
[ "$msgs" = "$steps" ] || { echo "$input holds $msgs messages, not $steps" >&2; exit 1; }
[ $((bytes % msgs)) = 0 ] || { echo "$input: messages of unequal sizes" >&2; exit 1; }
msg_bytes=$((bytes / msgs))
# the first MEM_DAYS days: the same messages (all of one size), a prefix of the file
short=$work/short.grib
mem_steps=$((MEM_DAYS * 24))
head -c $((mem_steps * msg_bytes)) "$input" > "$short"

plan=$PWD/bench/pipelines/means.yaml
fail() { echo "DISAGREE: $*" >&2; exit 1; }
# run NAME SYSTEM FILE: one timed run (seconds appended to $work/NAME, peak RSS in KiB to
# $work/NAME.rss, user + system CPU seconds to $work/NAME.cpu), outputs in $work/out.NAME/,
# what it printed in $work/print.NAME
run() {
  local name=$1 sys=$2 file=$3 t0 t1 dir=$work/out.$1
  rm -rf "$dir"; mkdir -p "$dir"
  sync
  t0=$(now)
  if [ "$sys" = multio ]; then
    OUT_DIR=$dir LD_LIBRARY_PATH=$mlibs /usr/bin/time -f '%M %U %S' -o "$work/t" "$feed" "$file" --decode --plans="$plan" > "$work/print.$name" 2>&1 \
      || { tail "$work/print.$name" >&2; fail "$name: multio-feed failed"; }
  else
    OUT_DIR=$dir /usr/bin/time -f '%M %U %S' -o "$work/t" "$fs" pipeline run -q "$plan" "$file" > "$work/print.$name" 2> "$work/err.$name" \
      || { cat "$work/err.$name" >&2; fail "$name: fieldstore pipeline run failed"; }
  fi
  t1=$(now)
  echo "$t1 - $t0" | bc >> "$work/$name"
  tail -1 "$work/t" | awk '{print $1}' >> "$work/$name.rss"
  tail -1 "$work/t" | awk '{print $2 + $3}' >> "$work/$name.cpu"
}
check() {  # REFERENCE_NAME FIELDSTORE_NAME: the outputs agree, else stop
  "$py" bench/pipelines/compare.py "$work/out.$1" "$work/out.$2" "$work/print.$1" "$work/print.$2" "$points" > "$work/agree.$2" \
    || fail "$2 against $1 (above)"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# --- The month (DAYS), REPEATS rounds -------------------------------------------------------------
for ((r = 1; r <= R; r++)); do
  cat "$input" > /dev/null                               # warm, for whichever runs first
  if [ $((r % 2)) = 1 ]; then run multio multio "$input"; run fs fs "$input"
  else run fs fs "$input"; run multio multio "$input"; fi
  check multio fs
  echo "  round $r/$R: multio $(tail -1 "$work/multio") s, fieldstore $(tail -1 "$work/fs") s" >&2
  # the machine: reading the file, decoding every message with ecCodes alone
  t0=$(now); cat "$input" > /dev/null; t1=$(now); echo "$t1 - $t0" | bc >> "$work/floor.cat"
  t0=$(now); "$py" bench/pipelines/decode.py "$libeccodes" "$input" > "$work/decoded" || fail "decode.py"; t1=$(now)
  echo "$t1 - $t0" | bc >> "$work/floor.decode"
done
[ "$(cat "$work/decoded")" = "$steps" ] || fail "decode.py decoded $(cat "$work/decoded") messages, not $steps"
read -r daily monthly nvalues worst < "$work/agree.fs"

# --- Memory: the first MEM_DAYS days, one run each ------------------------------------------------
run multio.short multio "$short"; run fs.short fs "$short"
check multio.short fs.short
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# --- Report -------------------------------------------------------------------------------------
mib() { sort -n "$work/$1.rss" | tail -1 | awk '{printf "%.0f", $1 / 1024}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {r = a / b; if (r >= 1) printf "%.2f", r; else printf "%.3f", r}'; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN {printf "%.1f", n / s}'; }
mbs() { awk -v b="$bytes" -v s="$1" 'BEGIN {printf "%.0f", b / 1e6 / s}'; }
read -r mm mmin mmax <<<"$(stats "$work/multio")"
read -r fm fmin fmax <<<"$(stats "$work/fs")"
read -r cm _ _ <<<"$(stats "$work/floor.cat")"
read -r dm _ _ <<<"$(stats "$work/floor.decode")"
speed=$(ratio "$mm" "$fm")
if [ "$quick" = 1 ]; then sbar="-"; elif [ "$(echo "$speed >= 2" | bc)" = 1 ]; then sbar="met (>= 2x)"; else sbar="**missed** (>= 2x)"; fi
rs=$(sort -n "$work/fs.short.rss" | tail -1); rl=$(sort -n "$work/fs.rss" | tail -1)
if [ "$quick" = 1 ]; then mbar="-"; elif [ "$rl" -le $((rs * 5 / 4 + 16384)) ]; then mbar="met"; else mbar="**missed**"; fi
echo "| $steps hourly fields of $points points (${DAYS} days, $((bytes / 1048576)) MiB of GRIB), daily + monthly means | MultIO $multio_version \`multio-feed --decode\` | fieldstore \`pipeline run\` | MultIO time / fieldstore time | bar |"
echo "| --- | --- | --- | --- | --- |"
echo "| median s (min-max), $R runs | $mm ($mmin-$mmax) | $fm ($fmin-$fmax) | ${speed}x | $sbar |"
read -r mc mcmin mcmax <<<"$(stats "$work/multio.cpu")"
read -r fc fcmin fcmax <<<"$(stats "$work/fs.cpu")"
echo "| CPU s (user + system), median (min-max) | $mc ($mcmin-$mcmax) | $fc ($fcmin-$fcmax) | $(ratio "$mc" "$fc")x | |"
echo "| fields/s | $(rate "$steps" "$mm") | $(rate "$steps" "$fm") | | |"
echo "| MB/s of GRIB read | $(mbs "$mm") | $(mbs "$fm") | | |"
echo "| peak RSS MiB, ${DAYS} days ($steps steps) | $(mib multio) | $(mib fs) | | |"
echo "| peak RSS MiB, ${MEM_DAYS} days ($mem_steps steps), 1 run | $(mib multio.short) | $(mib fs.short) | | $mbar (fieldstore's ${DAYS}-day peak <= 1.25x + 16 MiB of its ${MEM_DAYS}-day peak) |"
echo "| time s, ${MEM_DAYS} days, 1 run | $(stats "$work/multio.short" | cut -d' ' -f1) | $(stats "$work/fs.short" | cut -d' ' -f1) | $(ratio "$(stats "$work/multio.short" | cut -d' ' -f1)" "$(stats "$work/fs.short" | cut -d' ' -f1)")x | |"
echo
echo "Machine, same rounds (medians): \`cat\` of the GRIB file (warm) $cm s ($(mbs "$cm") MB/s); ecCodes $eccodes_version decoding every message alone (C API via ctypes, one reused buffer) $dm s ($(rate "$steps" "$dm") fields/s). Open windows: 2 (one daily, one monthly), $(awk -v p="$points" 'BEGIN {printf "%.1f", p * 8 / 1048576}') MiB of running mean each; one decoded field as much, one message $((msg_bytes / 1024)) KiB. Load average before/after: $load_before / $load_after ($(nproc) cores)."
echo
echo "Agreement (every round and the ${MEM_DAYS}-day run): the same $((daily + monthly)) outputs ($daily daily, $monthly monthly) with the same window metadata (operation, dates, times, steps, param), $nvalues values, largest relative difference $worst (limit 1e-12)."

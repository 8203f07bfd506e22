#!/usr/bin/env bash
# One C program (bench/c/archive_retrieve.c), compiled against Debian's FDB5 5.10.8 header and
# linked against Debian's libfdb5.so.0d, run unchanged on FDB5 and on fieldstore's library (by
# LD_LIBRARY_PATH alone), in the same run: archive+flush of N small fields with a key each, then
# retrieve one request per field and one request for all, every byte checked. Rounds alternate
# which system goes first, each on a fresh store; medians (min-max) of fields/s, and the ratios.
#
# Usage: bench/c/run.sh [FIELDS=100000] [REPEATS=3]
# fieldstore's side is the 5.10 build (target/release/libfdb5_510.so, soname libfdb5.so.0d) when
# it exists, else the main build (libfdb5.so), whose functions this program calls have the same ABI.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-100000}
R=${2:-3}
. bench/lib.sh
bench_setup
command -v cc >/dev/null || { echo "no C compiler (cc)" >&2; exit 1; }
[ -f /usr/include/x86_64-linux-gnu/fdb5/api/fdb_c.h ] && [ -f /usr/lib/x86_64-linux-gnu/libfdb5.so.0d ] \
  || { echo "Debian's FDB5 is missing (apt-get install libfdb5-dev)" >&2; exit 1; }

# fieldstore's library, copied (as the soname the program asks for) so a rebuild cannot change it.
lib=target/release/libfdb5_510.so
[ -f "$lib" ] || lib=target/release/libfdb5.so
[ -f "$lib" ] || { echo "no $lib: cargo build --release failed to make it" >&2; exit 1; }
mkdir -p "$work/fslib"
cp "$lib" "$work/fslib/libfdb5.so.0d"
cc -O2 -Wall -Wextra -Werror -I/usr/include/x86_64-linux-gnu -o "$work/archive_retrieve" \
  bench/c/archive_retrieve.c /usr/lib/x86_64-linux-gnu/libfdb5.so.0d

# Corpus: oper fc, 4 params x 10 pressure levels a step, ~2.2 KiB a field, N rounded up to 40.
steps=$(( (N + 39) / 40 ))
$fs sample --out "$work/small.grib" --params t/u/v/q --levels 1000/925/850/700/500/400/300/250/200/100 \
  --steps "$(seq -s/ 0 $((steps - 1)))" --points "${POINTS:-1000}" 2>/dev/null
fields=$((steps * 40))
size=$(stat -c %s "$work/small.grib")
# What a round touches (the corpus, each system's store, each program's copy of the corpus and
# its retrieve buffer: about 7 times the corpus), touched once before anything is timed: on this
# VM first-touched memory costs a fault per page, which would land on whichever system meets it.
[ "$N" -ge 10000 ] && warm_memory $(( (8 * size >> 30) + 1 )) "$work"

# prog SYS: runs the program on SYS's fresh store; appends its figures to $work/SYS.out.
prog() {
  local sys=$1 root="$work/root-$1"
  rm -rf "$root"; mkdir -p "$root"
  printf 'type: local\nengine: toc\nschema: %s\nspaces: [{handler: Default, roots: [{path: %s}]}]\n' \
    "$schema" "$root" > "$work/$sys.yaml"
  # Dirty pages left by the previous step are written back first, untimed.
  sync
  if [ "$sys" = fdb5 ]; then
    FDB5_CONFIG_FILE="$work/$sys.yaml" "$work/archive_retrieve" "$work/small.grib" >> "$work/$sys.out"
  else
    LD_LIBRARY_PATH="$work/fslib" FDB5_CONFIG_FILE="$work/$sys.yaml" \
      "$work/archive_retrieve" "$work/small.grib" >> "$work/$sys.out"
  fi
  rm -rf "$root"
}

for r in $(seq 1 "$R"); do
  order="fdb5 fieldstore"; [ $((r % 2)) -eq 0 ] && order="fieldstore fdb5"
  for sys in $order; do prog "$sys"; done
  # The machine's limits in the same round: the corpus copied to the same filesystem and
  # fdatasync'd (archive), and memcpy bandwidth (retrieves come from the page cache).
  sync; t0=$(now); dd if="$work/small.grib" of="$work/dd.out" bs=8M conv=fdatasync status=none
  echo "$(now) - $t0" | bc >> "$work/dd.limit"; rm -f "$work/dd.out"
  mbw -q -n 2 -t0 512 | awk '/^AVG/ {print $9}' >> "$work/memcpy.limit"
done

# The program ran on the library each side names: fieldstore's reports fieldstore-<version>.
lastlib() { tail -1 "$work/$1.out" | grep -o 'version=.*' | sed 's/version=\([^ ]*\) library=/\1 /'; }
fs_vcs=$(lastlib fieldstore); fdb5_vcs=$(lastlib fdb5)
case $fs_vcs in *" fieldstore"*) ;; *) echo "LD_LIBRARY_PATH did not load fieldstore's library ($fs_vcs)" >&2; exit 1;; esac

# col SYS KEY: the values of KEY=... from SYS's runs, one a line.
col() { grep -o "$2=[0-9.]*" "$work/$1.out" | cut -d= -f2 > "$work/$1.$2"; echo "$work/$1.$2"; }
for sys in fdb5 fieldstore; do
  [ "$(grep -c . "$work/$sys.out")" -eq "$R" ] || { echo "$sys: expected $R result lines" >&2; exit 1; }
  grep -q "fields=$fields bytes=$size " "$work/$sys.out" || { echo "$sys: wrong field count or size" >&2; exit 1; }
done
echo "| workload ($fields fields, $((size / fields)) B each, one C binary) | FDB5 5.10.8 fields/s median (min-max) | fieldstore fields/s median (min-max) | fieldstore / FDB5 | bar |"
echo "| --- | --- | --- | --- | --- |"
for w in archive retrieve_each retrieve_all; do
  read -r fm fmin fmax <<<"$(stats "$(col fdb5 ${w}_fps)")"
  read -r om omin omax <<<"$(stats "$(col fieldstore ${w}_fps)")"
  ratio=$(echo "scale=2; $om / $fm" | bc)
  case $w in
    archive) label="archive+flush, fdb_archive with a key per field"; bar=5;;
    retrieve_each) label="retrieve, one request per field (new handle)"; bar=3;;
    retrieve_all) label="retrieve, one request naming all fields"; bar=3;;
  esac
  echo "| $label | ${fm%.*} (${fmin%.*}-${fmax%.*}) | ${om%.*} (${omin%.*}-${omax%.*}) | ${ratio}x | ${bar}x |"
done
dd_s=$(stats "$work/dd.limit" | cut -d' ' -f1)
mem=$(stats "$work/memcpy.limit" | cut -d' ' -f1)
echo
echo "machine limit, archive: the same $((size / 1048576)) MiB copied with dd conv=fdatasync to the same filesystem: median $dd_s s ($(echo "$size / $dd_s / 1048576" | bc) MiB/s, $(echo "$fields / $dd_s" | bc) fields/s)"
echo "machine limit, retrieve: memcpy (mbw, 512 MiB) median ${mem%.*} MiB/s ($(echo "$mem * 1048576 / ($size / $fields)" | bc) fields/s)"
echo "libraries (fdb_version, fdb_vcs_version): FDB5 $fdb5_vcs (/usr/lib/x86_64-linux-gnu/libfdb5.so.0d), fieldstore $fs_vcs ($lib as libfdb5.so.0d); $R rounds, alternating which goes first; every round checked every field's bytes (one request per field: equal to what was archived; one request for all: same messages)"

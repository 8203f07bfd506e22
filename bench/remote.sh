#!/usr/bin/env bash
# Remote access through one `fieldstore server` on loopback, against local access to the same kind
# of store and against the loopback TCP bandwidth (iperf3, one stream) as the limit, in one run;
# also that stream written to a file on the stores' filesystem (iperf3 -F), and the large corpus
# copied into a fresh file there (dd): the limits once bytes must be stored.
# Every round runs all of them in turn (TCP, TCP into a file, dd, FDB5, local, remote), so each
# archive is set against limits measured a few seconds away; ratios are taken per round and their
# median reported, because this VM's cost of writing into fresh memory swings 2-5x between runs
# (bench/NOTES.md, "Fresh memory on this VM").
# Workloads: archive+flush and retrieve-all of many small fields, and of a few large ones. Each is
# repeated on a fresh store; medians (min-max) are reported, because the machine is shared. The
# anchor: the same workloads through FDB5's own `fdb-server` (5.10.8) with a `type: remote` client
# config (its retrieves of many fields are known to hang: they are stopped after 60 s).
# Stores live on tmpfs (BENCH_DIR, default /dev/shm) so the disk does not hide the protocol's cost.
# Usage: bench/remote.sh [SMALL_FIELDS≈10000] [REPEATS=3] [LARGE_FIELDS=128]
# (128 large fields are 1 GiB: enough that the ~50 ms every process spends loading ecCodes'
# definitions does not hide the transfer rate.)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10000}
R=${2:-3}
L=${3:-128}
. bench/lib.sh
bench/install-deps >/dev/null
cargo build --release -q
fs=$PWD/target/release/fieldstore
work=$(mktemp -d -p "${BENCH_DIR:-/dev/shm}")
server_pid=""
schema=$PWD/crates/fieldstore/tests/fixtures/ecmwf-fdb5-schema
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
unset FDB_CONFIG FDB5_CONFIG FDB_CONFIG_FILE FDB5_CONFIG_FILE FDB_HOME FDB5_HOME FIELDSTORE_TOKEN
export FIELDSTORE_TOKEN=bench-token

# Corpora: small = oper fc, 4 params x 10 levels x steps (~2 KiB a field); large = t/u on 2 levels
# x steps, 4M points (~8 MiB a field).
steps=$(( (N + 39) / 40 ))
$fs sample --out "$work/small.grib" --params t/u/v/q --levels 1000/925/850/700/500/400/300/250/200/100 \
  --steps "$(seq -s/ 0 $((steps - 1)))" --points 1000 2>/dev/null
small_fields=$((steps * 40))
lsteps=$(( (L + 3) / 4 ))
$fs sample --out "$work/large.grib" --params t/u --levels 1000/500 \
  --steps "$(seq -s/ 0 $((lsteps - 1)))" --points 4000000 2>/dev/null
large_fields=$((lsteps * 4))
small_size=$(stat -c %s "$work/small.grib")
large_size=$(stat -c %s "$work/large.grib")
base="class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl"
echo "retrieve,$base,levelist=1000/925/850/700/500/400/300/250/200/100,param=130/131/132/133,step=0/to/$((steps - 1))/by/1" > "$work/small.req"
echo "retrieve,$base,levelist=1000/500,param=130/131,step=0/to/$((lsteps - 1))/by/1" > "$work/large.req"

# Each round's stores, outputs and the iperf3 file together reach ~8 times the large corpus.
warm_memory $(( (8 * large_size >> 30) + 1 )) "$work"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Loopback TCP bandwidth, one stream, 5 s; then the same stream stored by the receiver in a file
# next to the stores (iperf3 -F, 1 MiB writes: no checksum, no index, no GRIB to read); then the
# large corpus copied into a fresh file there (dd, 1 MiB blocks: storing alone, no network).
limits() {
  local p
  p=$(free_port)
  iperf3 -s -1 -p "$p" >/dev/null 2>&1 &
  sleep 0.5
  iperf3 -c 127.0.0.1 -p "$p" -t 5 -J > "$work/iperf.json"
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 8 / 2**20)' "$work/iperf.json" >> "$work/iperf"
  wait
  p=$(free_port)
  iperf3 -s -1 -p "$p" -F "$work/iperf-received" >/dev/null 2>&1 &
  sleep 0.5
  iperf3 -c 127.0.0.1 -p "$p" -n "$large_size" -l 1M -J > "$work/iperf.json"
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 8 / 2**20)' "$work/iperf.json" >> "$work/iperf-file"
  wait
  rm -f "$work/iperf-received"
  local t0; t0=$(now)
  dd if="$work/large.grib" of="$work/dd-copy" bs=1M status=none
  echo "$large_size / ($(now) - $t0) / 1048576" | bc -l >> "$work/dd"
  rm -f "$work/dd-copy"
}

# run NAME SYSTEM COMMAND...: appends the elapsed seconds to $work/NAME.SYSTEM
# Also notes the CPU time the hypervisor took from this VM meanwhile (steal, in 1/100 s), which
# tells a slow run on a busy host from a slow program.
steal() { awk '/^cpu / {print $9}' /proc/stat; }
run() {
  local name=$1 sys=$2; shift 2
  local t0 s0; t0=$(now); s0=$(steal)
  "$@" >/dev/null 2>"$work/last.err" || { cat "$work/last.err" >&2; exit 1; }
  local secs; secs=$(echo "$(now) - $t0" | bc)
  echo "$secs" >> "$work/$name.$sys"
  printf '%.3f (steal %d) ' "$secs" $(( $(steal) - s0 )) >> "$work/$name.$sys.runs"
}

# run_or_hang: as run, but a command still running after 60 s is stopped and recorded as a hang.
run_or_hang() {
  local name=$1 sys=$2; shift 2
  local t0; t0=$(now)
  if timeout 60 "$@" >/dev/null 2>"$work/last.err"; then
    echo "$(now) - $t0" | bc >> "$work/$name.$sys"
  else
    echo "$sys $name did not finish in 60 s: $(tail -1 "$work/last.err")" >&2
    echo hang >> "$work/$name.$sys"
  fi
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

for r in $(seq 1 "$R"); do
  limits
  # FDB5 through its own server: the same corpora, same schema.
  root="$work/root-fdb5"; mkdir -p "$root"
  p=$(free_port)
  printf 'type: local\nengine: toc\nschema: %s\nserverPort: %s\nspaces: [{handler: Default, roots: [{path: %s}]}]\n' "$schema" "$p" "$root" > "$work/fdb5-server.yaml"
  printf 'type: remote\nhost: 127.0.0.1\nport: %s\n' "$p" > "$work/fdb5-client.yaml"
  FDB5_CONFIG_FILE="$work/fdb5-server.yaml" fdb-server > "$work/fdb5-server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 100); do port_open "$p" && break; sleep 0.05; done
  export FDB5_CONFIG_FILE="$work/fdb5-client.yaml"
  run write-small fdb5 fdb-write "$work/small.grib"
  run_or_hang read-small fdb5 fdb-read "$work/small.req" "$work/out-small-fdb5"
  run write-large fdb5 fdb-write "$work/large.grib"
  run_or_hang read-large fdb5 fdb-read "$work/large.req" "$work/out-large-fdb5"
  unset FDB5_CONFIG_FILE
  pkill -P "$server_pid" 2>/dev/null || true
  kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true; server_pid=""
  rm -rf "$root"
  for sys in local remote; do
    root="$work/root-$sys"; mkdir -p "$root"
    printf 'type: local\nspaces: [{roots: [{path: %s}]}]\n' "$root" > "$work/local.yaml"
    cfg="$work/local.yaml"
    if [ $sys = remote ]; then
      "$fs" --config "$work/local.yaml" server --listen 127.0.0.1:0 > "$work/server.out" 2> "$work/server.log" &
      server_pid=$!
      for _ in $(seq 1 100); do grep -q listening "$work/server.out" && break; sleep 0.05; done
      port=$(sed -n 's/^listening on .*://p' "$work/server.out")
      printf 'type: remote\nhost: 127.0.0.1\nport: %s\n' "$port" > "$work/remote.yaml"
      cfg="$work/remote.yaml"
    fi
    run write-small $sys "$fs" --config "$cfg" write "$work/small.grib"
    run read-small $sys "$fs" --config "$cfg" read "$work/small.req" "$work/out-small-$sys"
    run write-large $sys "$fs" --config "$cfg" write "$work/large.grib"
    run read-large $sys "$fs" --config "$cfg" read "$work/large.req" "$work/out-large-$sys"
    if [ $sys = remote ]; then kill -TERM "$server_pid"; wait "$server_pid" || true; server_pid=""; fi
    rm -rf "$root"
  done
  for k in small large; do
    cmp -s "$work/out-$k-local" "$work/out-$k-remote" || { echo "$k: remote and local retrieves differ" >&2; exit 1; }
  done
  # This round's remote and local archive of large fields against this round's limits.
  tcp_r=$(tail -1 "$work/iperf"); file_r=$(tail -1 "$work/iperf-file"); dd_r=$(tail -1 "$work/dd")
  rem_r=$(echo "$large_size / $(tail -1 "$work/write-large.remote") / 1048576" | bc -l)
  loc_r=$(echo "$large_size / $(tail -1 "$work/write-large.local") / 1048576" | bc -l)
  rem_tcp=$(echo "100 * $rem_r / $tcp_r" | bc -l); rem_file=$(echo "100 * $rem_r / $file_r" | bc -l)
  echo "$rem_tcp" >> "$work/ratio-remote-tcp"
  echo "$rem_file" >> "$work/ratio-remote-file"
  echo "100 * $file_r / $tcp_r" | bc -l >> "$work/ratio-file-tcp"
  echo "100 * $dd_r / $tcp_r" | bc -l >> "$work/ratio-dd-tcp"
  printf -- "- round %d: TCP %.0f MiB/s, TCP into a file %.0f, dd %.0f, local archive %.0f, remote archive %.0f MiB/s: remote %.0f %% of TCP, %.0f %% of TCP into a file\n" \
    "$r" "$tcp_r" "$file_r" "$dd_r" "$loc_r" "$rem_r" "$rem_tcp" "$rem_file" >> "$work/rounds"
done

# What every `write` process pays whatever its size (start, ecCodes loading its definitions,
# connect, flush): one field, timed by hyperfine, local and through a server.
$fs sample --out "$work/one.grib" --params t --levels 500 --steps 0 --points 1000 2>/dev/null
root="$work/root-one"; mkdir -p "$root"
printf 'type: local\nspaces: [{roots: [{path: %s}]}]\n' "$root" > "$work/local.yaml"
"$fs" --config "$work/local.yaml" server --listen 127.0.0.1:0 > "$work/server.out" 2> "$work/server.log" &
server_pid=$!
for _ in $(seq 1 100); do grep -q listening "$work/server.out" && break; sleep 0.05; done
port=$(sed -n 's/^listening on .*://p' "$work/server.out")
printf 'type: remote\nhost: 127.0.0.1\nport: %s\n' "$port" > "$work/remote.yaml"
for sys in local remote; do
  hyperfine -N -w 2 -r 10 --export-json "$work/one-$sys.json" "$fs --config $work/$sys.yaml write $work/one.grib" >/dev/null 2>&1
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["median"])' "$work/one-$sys.json" > "$work/one.$sys"
done
kill -TERM "$server_pid"; wait "$server_pid" || true; server_pid=""
rm -rf "$root"

read -r tcp tcpmin tcpmax <<<"$(stats "$work/iperf")"
echo "loopback TCP (iperf3, 1 stream): median $(printf %.0f "$tcp") MiB/s ($(printf %.0f "$tcpmin")-$(printf %.0f "$tcpmax"))"
read -r tcpf tcpfmin tcpfmax <<<"$(stats "$work/iperf-file")"
echo "loopback TCP into a file on the stores' filesystem (iperf3 -F, 1 MiB writes, $((large_size / 1048576)) MiB): median $(printf %.0f "$tcpf") MiB/s ($(printf %.0f "$tcpfmin")-$(printf %.0f "$tcpfmax")), $(printf %.0f "$(echo "100 * $tcpf / $tcp" | bc -l)") % of TCP"
read -r ddm ddmin ddmax <<<"$(stats "$work/dd")"
echo "copy of the large corpus into a fresh file there (dd, 1 MiB blocks): median $(printf %.0f "$ddm") MiB/s ($(printf %.0f "$ddmin")-$(printf %.0f "$ddmax"))"
echo
echo "Large-field archive against the limits of the same round (median of the per-round ratios, min-max):"
for k in remote-tcp:"remote archive / TCP" remote-file:"remote archive / TCP into a file" file-tcp:"TCP into a file / TCP" dd-tcp:"dd into a file / TCP"; do
  read -r m lo hi <<<"$(stats "$work/ratio-${k%%:*}")"
  printf -- "- %s: %.0f %% (%.0f-%.0f)\n" "${k#*:}" "$m" "$lo" "$hi"
done
cat "$work/rounds"
one_l=$(cat "$work/one.local"); one_r=$(cat "$work/one.remote")
read -r rm_large _ _ <<<"$(stats "$work/write-large.remote")"
net=$(echo "$large_size / ($rm_large - $one_r) / 1048576" | bc -l)
printf "\nFixed cost of a \`write\` process (one field, hyperfine median of 10): local %.0f ms, remote %.0f ms.\n" "$(echo "1000 * $one_l" | bc -l)" "$(echo "1000 * $one_r" | bc -l)"
printf "Remote archive of large fields net of it: %.0f MiB/s, %.0f %% of the median TCP.\n" "$net" "$(echo "100 * $net / $tcp" | bc -l)"
echo
echo "| workload | local median s (min-max) | remote median s (min-max) | local | remote | remote / local | remote / TCP | remote / TCP into a file | FDB5 via fdb-server median s | FDB5 remote |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for w in write-small read-small write-large read-large; do
  read -r lm lmin lmax <<<"$(stats "$work/$w.local")"
  read -r rm rmin rmax <<<"$(stats "$work/$w.remote")"
  case $w in
    *-small) n=$small_fields; size=$small_size; label="$n fields of $((size / n)) B";;
    *-large) n=$large_fields; size=$large_size; label="$n fields of $((size / n / 1048576)) MiB";;
  esac
  case $w in write-*) op="archive+flush";; read-*) op="retrieve all";; esac
  lr=$(echo "$size / $lm / 1048576" | bc -l); rr=$(echo "$size / $rm / 1048576" | bc -l)
  lf=$(echo "$n / $lm" | bc -l); rf=$(echo "$n / $rm" | bc -l)
  if [ "${w#*-}" = small ]; then
    lt=$(printf "%.0f fields/s" "$lf"); rt=$(printf "%.0f fields/s" "$rf")
  else
    lt=$(printf "%.0f MiB/s" "$lr"); rt=$(printf "%.0f MiB/s" "$rr")
  fi
  if grep -q hang "$work/$w.fdb5"; then
    fdb5_s="hangs ($(grep -c hang "$work/$w.fdb5") of $R runs stopped at 60 s)"; fdb5_t="-"
  else
    read -r fm fmin fmax <<<"$(stats "$work/$w.fdb5")"
    fdb5_s="$fm ($fmin-$fmax)"
    if [ "${w#*-}" = small ]; then fdb5_t=$(printf "%.0f fields/s" "$(echo "$n / $fm" | bc -l)"); else fdb5_t=$(printf "%.0f MiB/s" "$(echo "$size / $fm / 1048576" | bc -l)"); fi
  fi
  printf "| %s, %s | %s (%s-%s) | %s (%s-%s) | %s | %s | %.0f %% | %.0f %% | %.0f %% | %s | %s |\n" "$op" "$label" \
    "$lm" "$lmin" "$lmax" "$rm" "$rmin" "$rmax" "$lt" "$rt" \
    "$(echo "100 * $lm / $rm" | bc -l)" "$(echo "100 * $rr / $tcp" | bc -l)" "$(echo "100 * $rr / $tcpf" | bc -l)" "$fdb5_s" "$fdb5_t"
done
echo
echo "Each run in order, seconds (hypervisor steal in 1/100 s):"
for w in write-small read-small write-large read-large; do
  for sys in local remote; do
    echo "- $w $sys: $(cat "$work/$w.$sys.runs")"
  done
done

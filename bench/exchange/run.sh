#!/usr/bin/env bash
# The ensemble exchange (issue 17): N producer processes each write S steps of F fields of a
# realistic size; one consumer process needs all of them. Compared in one run, per ensemble size
# and field size:
#   files   producers write one file per step (synced) and then a marker file; the consumer polls
#           each member's next marker every 10 ms and reads the step's file (what the seed's
#           memory exchange replaced);
#   toc     fieldstore on disk (toc, the same filesystem): producers archive + flush, the consumer
#           subscribes and retrieves each field it is told of;
#   memory  a memory-backed `fieldstore server` (when_full: block, retain: {databases: 2}):
#           producers and consumer are `type: remote` clients of it over loopback TCP;
#           nothing touches disk;
#   shm     the same server through its Unix socket (`--socket`, `socket:` in the remote
#           config): each field is handed over as a sealed shared-memory file, written once by
#           its producer and mapped by the server and the consumer (docs/protocol.md,
#           "Hand-over").
# Also the loopback TCP bandwidth (iperf3, one stream; 3 s at the start, 1 s beside each repeat) measured in the same run: the limit of
# any exchange through a server. Per exchange: total time (first producer ready to write, after
# its start-up → last field held by the consumer),
# throughput, and the latency from a producer's flush (or marker) returning to the consumer
# holding the field's bytes (p50/p99/max; every process logs the same wall clock).
# The processes are crates/fieldstore/examples/exchange.rs.
# Usage: bench/exchange/run.sh [MEMBERS="2 5 10"] [STEPS=5] [FIELD_SIZES="1M 10M"] [FIELDS=4]
#        (STEPS is the largest size's; smaller sizes take proportionally more, saturated)
#        bench/exchange/run.sh --quick      (seconds: 2 members, 2 steps, 2 fields of 1 MiB)
# EXCHANGE_REPEATS (default 3; 1 with --quick): runs of each saturated exchange, median reported.
# Work files go to BENCH_DIR (default /tmp: a disk, so files and toc are what a disk does).
# EXCHANGE_BIN=DIR takes `fieldstore` and `exchange` from DIR instead of building them, so two
# builds (before and after a change) can be measured back to back on the same machine state.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = "--quick" ]; then
  set -- 2 2 1M 2
  export EXCHANGE_REPEATS=${EXCHANGE_REPEATS:-1}
fi
MEMBERS=${1:-"2 5 10"}
STEPS=${2:-5}
SIZES=${3:-"1M 10M"}
FIELDS=${4:-4}
# Saturated exchanges are repeated (modes interleaved) and the median run of each is reported:
# one lasts 0.05-4 s, where a single run on this shared machine is noisy.
REPEATS=${EXCHANGE_REPEATS:-3}
scripts/install-deps --bench >/dev/null
bin=${EXCHANGE_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release -q -p fieldstore-cli
  cargo build --release -q -p fieldstore --example exchange
  bin=target/release
  ex_bin=target/release/examples/exchange
else
  ex_bin=$bin/exchange
fi
work=$(mktemp -d -p "${BENCH_DIR:-/tmp}")
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
# Copies, so a rebuild during the run cannot change what is measured.
cp "$bin/fieldstore" "$ex_bin" "$work/"
fs=$work/fieldstore
ex=$work/exchange
unset FDB_CONFIG FDB5_CONFIG FDB_CONFIG_FILE FDB5_CONFIG_FILE FDB_HOME FDB5_HOME
export FIELDSTORE_TOKEN=bench-exchange

bytes() { case $1 in *K) echo $(( ${1%K} << 10 ));; *M) echo $(( ${1%M} << 20 ));; *) echo "$1";; esac; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); work dir $work ($(df -h --output=source "$work" | tail -1), $(stat -f -c %T "$work"))"
echo "exchange: members [$MEMBERS], $STEPS steps, $FIELDS fields a step, field sizes [$SIZES]; binaries from $bin"

# Loopback TCP, one stream, SECONDS long (MiB/s): measured at the start and again beside every
# repeat of every exchange, since on a shared machine one measurement at the start says little
# about the minutes after it. Each exchange's share of TCP is against the median of the
# measurements taken beside its own runs.
tcp_now() {
  local p
  p=$(free_port)
  iperf3 -s -1 -p "$p" >/dev/null 2>&1 &
  sleep 0.3
  iperf3 -c 127.0.0.1 -p "$p" -t "$1" -J > "$work/iperf.json"
  wait
  python3 -c 'import json,sys; print("%.1f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 8 / 2**20))' "$work/iperf.json"
}
tcp=$(tcp_now 3)
echo "iperf3 loopback TCP, one stream: $tcp MiB/s"

# Saturated runs of smaller fields take more steps, so that every field size moves as many bytes
# as the largest does in STEPS: a throughput is measured over the same volume, not over the
# few milliseconds a run of small fields would otherwise last (then start-up is what it measures).
# EXCHANGE_SAME_STEPS=1 runs STEPS for every size, as before 2026-11-28.
max_size=0
for s in $SIZES; do [ "$(bytes "$s")" -gt $max_size ] && max_size=$(bytes "$s"); done
steps_of() {
  if [ "${EXCHANGE_SAME_STEPS:-0}" = 1 ]; then echo "$STEPS"; else echo $(( STEPS * max_size / $(bytes "$1") )); fi
}
# The memory server: room for the two largest cycles it keeps.
largest=0
for m in $MEMBERS; do for s in $SIZES; do
  n=$(( m * $(steps_of "$s") * FIELDS * $(bytes "$s") )); [ $n -gt $largest ] && largest=$n
done; done
capacity=$(( 2 * largest + (256 << 20) ))
printf 'type: local\nengine: memory\nmemory: {capacity: %s, when_full: block, block_timeout: 30s, retain: {databases: 2}}\n' "$capacity" > "$work/memory.yaml"
"$fs" --config "$work/memory.yaml" server --listen 127.0.0.1:0 --socket "$work/server.sock" > "$work/server.out" 2> "$work/server.log" &
server_pid=$!
for _ in $(seq 1 100); do grep -q listening "$work/server.out" && break; sleep 0.05; done
port=$(sed -n 's/^listening on .*://p' "$work/server.out")
[ -n "$port" ] || { echo "the memory server did not start:"; cat "$work/server.log"; exit 1; }
printf 'type: remote\nhost: 127.0.0.1\nport: %s\n' "$port" > "$work/remote.yaml"
printf 'type: remote\nsocket: %s\n' "$work/server.sock" > "$work/local.yaml"

run=0
: > "$work/results"
# A new, valid date per exchange (set here, not in the piped function's subshell): runs against
# the one server never mix, and each memory run makes a new cycle, so retention wipes the old.
next_cycle() {
  export EXCHANGE_DATE
  EXCHANGE_DATE=$(printf '2026%02d%02d' $((1 + run / 28)) $((1 + run % 28)))
  run=$((run + 1))
}
exchange() { # MODE MEMBERS SIZE STEPS: one exchange on fresh directories, in the cycle EXCHANGE_DATE
  local mode=$1 m=$2 size=$3 steps=$4 line
  rm -rf "$work/files" "$work/toc"; mkdir -p "$work/files" "$work/toc"
  printf 'type: local\nspaces: [{roots: [{path: %s}]}]\n' "$work/toc" > "$work/toc.yaml"
  sync
  case $mode in
    files) line=$("$ex" run files "$work/files" "$m" "$steps" "$FIELDS" "$size") ;;
    toc) line=$("$ex" run fdb "$work/toc.yaml" "$m" "$steps" "$FIELDS" "$size") ;;
    memory) line=$("$ex" run fdb "$work/remote.yaml" "$m" "$steps" "$FIELDS" "$size") ;;
    shm) line=$("$ex" run fdb "$work/local.yaml" "$m" "$steps" "$FIELDS" "$size") ;;
  esac
  echo "$mode ${line#mode=* }"
}
# Saturated: steps back to back (total time, throughput). Paced: each producer waits between
# steps as a model computing would, offering about 200 MiB/s in all (5 ms per MiB of a step), so
# the latency is the exchange's own and not a queue behind a saturated consumer.
for size in $SIZES; do
  for m in $MEMBERS; do
    for rep in $(seq 1 "$REPEATS"); do
      for mode in files toc memory shm; do
        next_cycle
        exchange $mode "$m" "$size" "$(steps_of "$size")" | sed 's/^/saturated /' | tee -a "$work/results"
      done
      echo "tcp iperf3 members=$m size=$(bytes "$size") MiB_s=$(tcp_now 1)" | tee -a "$work/results"
    done
    export EXCHANGE_INTERVAL_MS=$(( m * FIELDS * $(bytes "$size") * 5 / (1 << 20) ))
    for mode in files toc memory shm; do
      next_cycle
      exchange $mode "$m" "$size" "$STEPS" | sed "s/^/paced-${EXCHANGE_INTERVAL_MS}ms /" | tee -a "$work/results"
    done
    unset EXCHANGE_INTERVAL_MS
  done
done
echo "memory server at the end: $(ps -o rss= -p "$server_pid" | awk '{printf "%.0f MiB RSS", $1/1024}') (capacity $((capacity >> 20)) MiB, 2 cycles kept)"

python3 - "$work/results" "$tcp" <<'EOF'
import sys
sat, paced, runs, tcps = {}, {}, {}, {}
for line in open(sys.argv[1]):
    kind, mode, *kv = line.split()
    d = dict(x.split("=") for x in kv)
    k = (int(d["size"]), int(d["members"]), mode)
    if kind == "tcp":
        tcps.setdefault(k[:2], []).append(float(d["MiB_s"]))
    elif kind == "saturated":
        runs.setdefault(k, []).append(d)
    else:
        paced[k] = d
# The median run (by total time) of each saturated exchange.
for k, v in runs.items():
    v.sort(key=lambda d: float(d["total_s"]))
    sat[k] = v[len(v) // 2]
f2 = lambda d, k: float(d[k])
med = lambda v: sorted(v)[len(v) // 2]
print()
print(f"Saturated (steps back to back): total seconds (median of {len(next(iter(runs.values())))} runs), and the memory exchanges' throughput against loopback TCP (iperf3 beside each repeat: median MiB/s)")
print()
print("| field | members | fields | files s | toc s | memory s | shm s | toc vs files | memory vs files | shm vs files | TCP MiB/s | memory MiB/s (% of TCP) | shm MiB/s (% of TCP) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for (size, members) in sorted({(s, m) for (s, m, _) in sat}):
    f, t, m, h = (sat[(size, members, k)] for k in ("files", "toc", "memory", "shm"))
    tcp = med(tcps.get((size, members), [float(sys.argv[2])]))
    n = int(m["members"]) * int(m["steps"]) * int(m["fields"])
    print(f"| {size >> 20} MiB | {members} | {n} | {f2(f,'total_s'):.3f} | {f2(t,'total_s'):.3f} | {f2(m,'total_s'):.3f} | {f2(h,'total_s'):.3f} "
          f"| {f2(f,'total_s') / f2(t,'total_s'):.2f}x | {f2(f,'total_s') / f2(m,'total_s'):.2f}x | {f2(f,'total_s') / f2(h,'total_s'):.2f}x "
          f"| {tcp:.0f} | {f2(m,'MiB_s'):.0f} ({100 * f2(m,'MiB_s') / tcp:.0f} %) | {f2(h,'MiB_s'):.0f} ({100 * f2(h,'MiB_s') / tcp:.0f} %) |")
print()
print("Latency, flush (marker) returned to the consumer holding the bytes, ms p50 / p99: paced (saturated)")
print()
print("| field | members | files | toc | memory | shm |")
print("|---|---|---|---|---|---|")
for (size, members) in sorted({(s, m) for (s, m, _) in paced}):
    cells = []
    for k in ("files", "toc", "memory", "shm"):
        p, s = paced[(size, members, k)], sat[(size, members, k)]
        cells.append(f"{f2(p,'p50_ms'):.1f} / {f2(p,'p99_ms'):.1f} ({f2(s,'p50_ms'):.0f} / {f2(s,'p99_ms'):.0f})")
    print(f"| {size >> 20} MiB | {members} | " + " | ".join(cells) + " |")
EOF

#!/usr/bin/env bash
# A well-behaved client's latency against one `fieldstore server`, quiet and then while 200 hostile
# clients do their worst, as ratios; with the server's peak resident memory against its
# --memory-budget, and one large field (1022 MiB, just under the 1 GiB frame limit; 32 MiB with --quick) archived through the same
# server meanwhile and read back byte-identical.
# Hostile clients (40 of each kind, Python, speaking the protocol by hand): slow frame senders
# (64 MiB frames at 160 KiB/s), huge announcers (1 GiB frames, 8 MiB sent, then a trickle), idle
# connections (hello, then nothing), garbage frames (connect, hello, 4 KiB of noise, again), and
# connection floods (connect and drop without a hello, again and again).
# The well-behaved client is the `fieldstore` command on a `type: remote` config: `write` of 40
# small fields (archive + flush), `list` of the store, `read` of 40 fields; each a new process, as
# a job would run it. Medians of REPEATS (min-max).
# Usage: bench/hostile.sh [--quick] [REPEATS=7]
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = "--quick" ]; then quick=1; shift; fi
R=${1:-7}
[ "$quick" = 1 ] && R=${1:-3}
. bench/lib.sh
bench_setup "${BENCH_DIR:-${TMPDIR:-/tmp}}"
export FIELDSTORE_TOKEN=bench-token
budget_mib=256
large_points=$(( quick ? 16 << 20 : (512 << 20) - (1 << 20) ))   # about 2 bytes a point: 32 MiB, or 1 GiB less the 2 MiB a frame needs beside it under the default --max-frame
hostile_pid=""
server_pid=""
cleanup() {
  set +e
  [ -n "$hostile_pid" ] && kill "$hostile_pid" 2>/dev/null
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

printf 'type: local\nspaces: [{roots: [{path: %s/root}]}]\n' "$work" > "$work/local.yaml"
mkdir -p "$work/spool"
TMPDIR=$work/spool "$fs" --config "$work/local.yaml" server --listen 127.0.0.1:0 \
  --memory-budget "${budget_mib}MiB" --connection-budget 16MiB --metrics 127.0.0.1:0 \
  > "$work/server.out" 2> "$work/server.log" &
server_pid=$!
for _ in $(seq 100); do grep -q '^listening on' "$work/server.out" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$work/server.out")
metrics=$(sed -n 's|^metrics on http://\(.*\)/metrics$|\1|p' "$work/server.out")
printf 'type: remote\nhost: 127.0.0.1\nport: %s\n' "$port" > "$work/remote.yaml"

"$fs" sample --out "$work/small.grib" --params t/u --levels 1000/500 --steps "$(seq -s/ 0 9)" \
  --points 1000 2>/dev/null
req="class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl,param=t/u,levelist=1000/500,step=0/to/9"
"$fs" --config "$work/remote.yaml" write "$work/small.grib" > /dev/null
"$fs" --config "$work/local.yaml" read "$req" "$work/expected.grib" > /dev/null 2>&1

rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$server_pid/status"; }
metric() { python3 - "$metrics" "$1" <<'EOF'
import sys, urllib.request
for line in urllib.request.urlopen(f"http://{sys.argv[1]}/metrics").read().decode().splitlines():
    if line.startswith(sys.argv[2] + " "):
        print(line.split()[1])
EOF
}

# One round of the well-behaved client: seconds for write, list, read, appended to $1.*.
measure() {
  local tag=$1 t0 t1
  for _ in $(seq "$R"); do
    t0=$(now); "$fs" --config "$work/remote.yaml" write "$work/small.grib" > /dev/null; t1=$(now)
    echo "$t1 - $t0" | bc -l >> "$work/$tag.write"
    t0=$(now); "$fs" --config "$work/remote.yaml" list class=od,expver=0001 --porcelain > /dev/null; t1=$(now)
    echo "$t1 - $t0" | bc -l >> "$work/$tag.list"
    t0=$(now); "$fs" --config "$work/remote.yaml" read "$req" "$work/out.grib" > /dev/null 2>&1; t1=$(now)
    echo "$t1 - $t0" | bc -l >> "$work/$tag.read"
    cmp -s "$work/out.grib" "$work/expected.grib" || { echo "read back differs" >&2; exit 1; }
  done
}

measure quiet
rss_quiet=$(rss_kib)

python3 - "$port" "$FIELDSTORE_TOKEN" > "$work/hostile.log" 2>&1 <<'EOF' &
import json, os, socket, struct, sys, threading, time

port, token = int(sys.argv[1]), sys.argv[2]
T = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    T.append(c)

def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = T[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF

def header(kind, req, length):
    return b"FSTO" + struct.pack(">HHQQ", 3, kind, req, length)

def frame(kind, req, payload):
    h = header(kind, req, len(payload)) + payload
    return h + struct.pack(">I", crc32c(h)) + b"FEND"

def hello(role):
    s = socket.create_connection(("127.0.0.1", port))
    body = json.dumps({"versions": [3], "token": token, "role": role, "client": "hostile"}).encode()
    h = header(1, 1, len(body)) + body
    s.sendall(h + struct.pack(">I", crc32c(h)) + b"FEND")
    s.recv(4096)
    return s

def prefix(step):
    key = [["class", "od"], ["expver", "0001"], ["stream", "oper"], ["date", "20261122"],
           ["time", "1200"], ["type", "fc"], ["levtype", "pl"], ["levelist", "850"],
           ["param", "t"], ["step", str(step)]]
    meta = json.dumps({"key": key, "grib": True}).encode()
    return struct.pack(">I", len(meta)) + meta

def forever(f):
    def run(i):
        while True:
            try:
                f(i)
            except OSError:
                time.sleep(0.2)
    return run

def slow(i):
    s = hello("archive")
    s.sendall(header(16, 2, 64 << 20) + prefix(1000 + i))
    while True:
        s.sendall(os.urandom(16 << 10))
        time.sleep(0.1)

def huge(i):
    s = hello("archive")
    s.sendall(header(16, 2, 1 << 30) + prefix(2000 + i))
    s.sendall(bytes(8 << 20))
    while True:
        s.sendall(bytes(4096))
        time.sleep(1)

def idle(i):
    s = hello("control")
    while True:
        time.sleep(60)

def garbage(i):
    s = hello("control")
    s.sendall(os.urandom(4096))
    while s.recv(65536):
        pass
    s.close()
    time.sleep(0.05)

def flood(i):
    s = socket.create_connection(("127.0.0.1", port))
    s.close()
    time.sleep(0.01)

for kind in (slow, huge, idle, garbage, flood):
    for i in range(40):
        threading.Thread(target=forever(kind), args=(i,), daemon=True).start()
print("200 hostile clients started", flush=True)
while True:
    time.sleep(60)
EOF
hostile_pid=$!
# Let them settle in (the huge announcers send their first 8 MiB each).
sleep $(( quick ? 3 : 10 ))
peak=$(rss_kib)
( while kill -0 "$server_pid" 2>/dev/null; do awk '/VmRSS/ {print $2}' "/proc/$server_pid/status"; sleep 0.1; done ) > "$work/rss" 2>/dev/null &
watch_pid=$!
measure hostile

# The large field, archived and read back while they go on.
"$fs" sample --out "$work/large.grib" --params t --levels 1000 --steps 0 --points "$large_points" 2>/dev/null
large_bytes=$(stat -c %s "$work/large.grib")
t0=$(now); "$fs" --config "$work/remote.yaml" write "$work/large.grib" > /dev/null; t1=$(now)
large_write=$(echo "$t1 - $t0" | bc -l)
"$fs" --config "$work/remote.yaml" read "class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl,param=t,levelist=1000,step=0" "$work/large.out" > /dev/null 2>&1
cmp -s "$work/large.out" "$work/large.grib" && identical=yes || identical=NO
kill "$watch_pid" 2>/dev/null || true
peak=$(sort -n "$work/rss" | tail -1)
connections=$(metric fieldstore_connections_total)
frame_errors=$(metric fieldstore_frame_errors_total)
waits=$(metric fieldstore_memory_budget_waits_total)
kill "$hostile_pid" 2>/dev/null || true

load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load average $load (shared VM); $R repeats"
echo "server: --memory-budget ${budget_mib}MiB --connection-budget 16MiB; RSS quiet $((rss_quiet >> 10)) MiB, peak under attack $((peak >> 10)) MiB"
echo "attack: 200 hostile clients (40 each: slow senders, 1 GiB announcers, idle, garbage frames, connection floods); $connections connections accepted, $frame_errors closed for bad frames, $waits waits for memory"
echo
echo "| well-behaved client | quiet median s (min-max) | under attack median s (min-max) | ratio |"
echo "| --- | --- | --- | --- |"
for op in write list read; do
  read -r qm qlo qhi <<< "$(stats "$work/quiet.$op")"
  read -r hm hlo hhi <<< "$(stats "$work/hostile.$op")"
  ratio=$(echo "$hm / $qm" | bc -l)
  label=$op; [ "$op" = write ] && label="write 40 fields (archive+flush)"
  [ "$op" = list ] && label="list the store"; [ "$op" = read ] && label="read 40 fields"
  printf '| %s | %.3f (%.3f-%.3f) | %.3f (%.3f-%.3f) | %.2fx |\n' "$label" "$qm" "$qlo" "$qhi" "$hm" "$hlo" "$hhi" "$ratio"
done
echo
printf 'large field: %d MiB archived under attack in %.1f s, read back byte-identical: %s; server RSS peak %d MiB (%.2f of the field, budget %d MiB)\n' \
  $((large_bytes >> 20)) "$large_write" "$identical" $((peak >> 10)) "$(echo "$peak * 1024 / $large_bytes" | bc -l)" "$budget_mib"
[ "$identical" = yes ]
[ $((peak >> 10)) -lt "$budget_mib" ] || { echo "server RSS went over its budget" >&2; exit 1; }

#!/usr/bin/env bash
# HTTP against the binary protocol, in one run, on one `fieldstore server --listen --http`:
# 1. retrieve throughput: the same large fields read by `fieldstore read` through the binary
#    protocol (a `remote` config) and by curl from GET /api/v1/retrieve (bar: HTTP >= 80 % of
#    the binary protocol's); rounds alternate which goes first, the median ratio is reported;
#    the bytes are checked equal;
# 2. the web view: the time from choosing a 0.1° field (3600 x 1801 = 6.48 M points) in
#    Chromium to its map drawn, measured in the page with performance.now() (bar: <= 1 s),
#    by crates/fieldstore-cli/tests/web/browser.py --bench (Chromium, Selenium from
#    scripts/browser-install).
# Stores live on tmpfs (BENCH_DIR, default /dev/shm).
# Usage: bench/http.sh [LARGE_FIELDS=64] [ROUNDS=5]   (bench/http.sh --quick: 8 fields, 2 rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = "--quick" ]; then quick=1; L=8; R=2; else L=${1:-64}; R=${2:-5}; fi
. bench/lib.sh
bench_setup "${BENCH_DIR:-/dev/shm}"
python=$(scripts/browser-install | tail -1)
server_pid=""
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"' EXIT
export FIELDSTORE_TOKEN=bench-token

printf 'type: local\nspaces: [{roots: [{path: %s}]}]\n' "$work/root" > "$work/local.yaml"
lsteps=$(( (L + 3) / 4 ))
$fs sample --out "$work/large.grib" --params t/u --levels 1000/500 \
  --steps "$(seq -s/ 0 $((lsteps - 1)))" --points 4000000 2>/dev/null
$fs sample --out "$work/big.grib" --grid 3600x1801 --params 2t --levtype sfc --steps 0/6/12 \
  --expver 0010 2>/dev/null
$fs --config "$work/local.yaml" write "$work/large.grib" "$work/big.grib" >/dev/null 2>&1
size=$(stat -c %s "$work/large.grib")
req="class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,levelist=1000/500,param=130/131,step=0/to/$((lsteps - 1))/by/1"

$fs --config "$work/local.yaml" server --listen 127.0.0.1:0 --http 127.0.0.1:0 \
  >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
for _ in $(seq 100); do grep -q "^listening on" "$work/server.out" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$work/server.out")
http=$(sed -n 's|^http on http://\(.*\)/$|\1|p' "$work/server.out")
printf 'type: remote\nhost: 127.0.0.1\nport: %s\n' "$port" > "$work/remote.yaml"
url="http://$http/api/v1/retrieve?request=$(python3 -c 'import sys,urllib.parse;print(urllib.parse.quote(sys.argv[1]))' "$req")"

binary() { $fs --config "$work/remote.yaml" read "$req" "$work/out.binary" 2>/dev/null; }
overhttp() { curl -sf -H "Authorization: Bearer $FIELDSTORE_TOKEN" -o "$work/out.http" "$url"; }
timed() { local t0; t0=$(now); "$@"; echo "$(now) - $t0" | bc; }

binary; overhttp
cmp "$work/out.binary" "$work/out.http" || { echo "HTTP bytes differ from the binary protocol's" >&2; exit 1; }
: > "$work/t.binary"; : > "$work/t.http"; : > "$work/ratio"
for r in $(seq "$R"); do
  rm -f "$work/out.binary" "$work/out.http"
  if [ $((r % 2)) = 1 ]; then
    tb=$(timed binary); th=$(timed overhttp)
  else
    th=$(timed overhttp); tb=$(timed binary)
  fi
  echo "$tb" >> "$work/t.binary"; echo "$th" >> "$work/t.http"
  echo "$tb / $th" | bc -l >> "$work/ratio"
done
read -r bmed bmin bmax <<<"$(stats "$work/t.binary")"
read -r hmed hmin hmax <<<"$(stats "$work/t.http")"
read -r rmed rmin rmax <<<"$(stats "$work/ratio")"
mib=$(echo "$size / 1048576" | bc -l)
verdict=$(echo "$rmed >= 0.8" | bc -l)

# The browser: choose expver 0010, then the step-6 field; the page times click -> drawn.
"$python" crates/fieldstore-cli/tests/web/browser.py --bench --url "http://$http/" \
  --token "$FIELDSTORE_TOKEN" --out "$work/shots" --choose expver=0010 --pick step=6 \
  --repeat "$R" > "$work/browser.json"
mkdir -p target/web-view && cp "$work/shots/map-0.1deg.png" target/web-view/ 2>/dev/null || true
drawn=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["choose_to_drawn_ms_median"], min(d["choose_to_drawn_ms"]), max(d["choose_to_drawn_ms"]), d["points_total"], d["points_drawn"], round(d["server_decode_ms"]), d["coloured_share_big"], d["chromium"])' "$work/browser.json")
read -r dmed dmin dmax ptotal pdrawn decode coloured chromium <<<"$drawn"
dverdict=$(echo "$dmed <= 1000" | bc -l)

echo "## HTTP retrieve vs the binary protocol; the web view's 0.1° map (bench/http.sh $L $R)"
echo
echo "| $L fields of 4 M points ($(printf '%.0f' "$mib") MiB), retrieve all, $R rounds | binary protocol (\`fieldstore read\`, remote config) | HTTP (\`curl\` GET /api/v1/retrieve) | HTTP / binary throughput | bar |"
echo "| --- | --- | --- | --- | --- |"
echo "| median s (min-max) | $bmed ($bmin-$bmax) | $hmed ($hmin-$hmax) | $(printf '%.2f' "$rmed") ($(printf '%.2f' "$rmin")-$(printf '%.2f' "$rmax")) | $([ "$verdict" = 1 ] && echo "met (>= 0.80)" || echo "NOT met (>= 0.80)") |"
echo "| MiB/s | $(echo "$mib / $bmed" | bc -l | xargs printf '%.0f') | $(echo "$mib / $hmed" | bc -l | xargs printf '%.0f') | | |"
echo
echo "| Chromium $chromium, choose a 0.1° field -> map drawn (performance.now in the page), $R times | median ms (min-max) | bar |"
echo "| --- | --- | --- |"
echo "| 3600 x 1801 = $ptotal points, $pdrawn drawn; server decode $decode ms; $(printf '%.0f' "$(echo "$coloured * 100" | bc -l)") % of the map coloured | $dmed ($dmin-$dmax) | $([ "$dverdict" = 1 ] && echo "met (<= 1000 ms)" || echo "NOT met (<= 1000 ms)") |"
# A missed bar fails a measuring run; the quick run (bench/run-all --quick, in the suite, on a
# machine that may be busy) checks that the bytes agree and the map is drawn, not the speed.
[ "$quick" = 1 ] || { [ "$verdict" = 1 ] && [ "$dverdict" = 1 ]; }

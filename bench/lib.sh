# Shared by the benchmark scripts (sourced): set-up, timing and statistics.

# Installs what the benchmarks need, builds, and makes a private work directory ($work, removed on
# exit) holding a copy of the binary ($fs), so a rebuild during the run cannot change what is
# measured. FDB5 and fieldstore see no config but the one each step names; FDB_HOME points at an
# empty directory (fdb-read 5.10.8 without it silently retrieves nothing).
# FIELDSTORE_BIN: measure that binary instead of building target/release/fieldstore.
bench_setup() {
  bench/install-deps >/dev/null
  [ -n "${FIELDSTORE_BIN:-}" ] || cargo build --release -q
  schema=$PWD/crates/fieldstore/tests/fixtures/ecmwf-fdb5-schema
  work=$(mktemp -d -p "${1:-${TMPDIR:-/tmp}}")
  trap 'rm -rf "$work"' EXIT
  cp "${FIELDSTORE_BIN:-target/release/fieldstore}" "$work/fieldstore"
  fs=$work/fieldstore
  unset FDB_CONFIG FDB5_CONFIG FDB_CONFIG_FILE FDB5_CONFIG_FILE FDB_HOME FDB5_HOME
  export FDB_HOME="$work/home"
  mkdir -p "$FDB_HOME"
}

now() { date +%s.%N; }

# Starts a MinIO keeping its data in DIR (scripts/minio): sets $endpoint and exports its keys as
# AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. The caller stops it (scripts/minio stop DIR).
minio_start() {
  scripts/minio start "$1" > "$work/minio.env"
  endpoint=$(sed -n 's/^endpoint=//p' "$work/minio.env")
  AWS_ACCESS_KEY_ID=$(sed -n 's/^access_key=//p' "$work/minio.env")
  AWS_SECRET_ACCESS_KEY=$(sed -n 's/^secret_key=//p' "$work/minio.env")
  export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
  unset AWS_PROFILE
}

# Median, minimum and maximum of the numbers in a file, one per line.
stats() { sort -n "$1" | awk '{a[NR]=$1} END {printf "%.3f %.3f %.3f", a[int((NR+1)/2)], a[1], a[NR]}'; }

# On this VM, memory the guest touches for the first time costs a hypervisor fault per page:
# writing 12 GiB into fresh tmpfs pages took 30 s, the same again 6 s. Touching what a run will
# use once, before anything is timed, keeps that cost out of whichever system happens to run
# first. Usage: warm_memory GIB DIR (capped at half the available memory).
warm_memory() {
  local gib=$1 dir=$2 avail
  avail=$(awk '/MemAvailable/ {print int($2 / 1048576)}' /proc/meminfo)
  [ "$gib" -gt $((avail / 2)) ] && gib=$((avail / 2))
  [ "$gib" -ge 1 ] || return 0
  dd if=/dev/zero of="$dir/warm-memory" bs=1M count=$((gib * 1024)) status=none
  rm -f "$dir/warm-memory"
}

#!/usr/bin/env bash
# The benchmark of issue 16, in one run: a baseline server (a bare poem
# handler, tests/bench/baseline.rs) and ingest in embedded mode on a fresh
# SQLite directory, loaded in turn with the same wrk script, then the
# notifier benchmark (tests/bench/notifier.rs). Rows:
#
#   baseline             the bare handler: the body parsed, a v7 UUID, a 201
#   baseline + SQLite    the same plus one insert per request (one connection,
#                        WAL, synchronous=normal: with full, the sync per
#                        request is all it measures)
#   baseline + store     the bare handler recording the event with Tocsin's
#                        embedded store as ingest opens it (group commit,
#                        synchronous=full, the read side's indexes): the
#                        ceiling of the notify:false row, which adds ingest's
#                        request pipeline (key, limits, validation, ...)
#   synchronous=normal   notify:false (below) on an ingest that syncs at
#                        checkpoints only (INGEST_SQLITE_SYNCHRONOUS=normal):
#                        what the default, surviving a power loss, costs
#   notify:false         ingest's POST /v1/events
#   notify:false, userId ... each event naming one of 1000 users (its
#                        counters' upsert, in the same transaction)
#   idempotency-key      ... with a unique Idempotency-Key per request
#   notify:true          ... asking for a push, the project has no device
#   notify:true 4 dev    ... with 4 devices (the logging provider), and
#                        whether the pushes' backlog is 0 within 2 s after
#                        the load stops
#
# each with requests/s, the ratio to the baseline row, p50 and p99, the
# server's CPU time (all threads, user and system) per 201, and the
# server's resident memory after the row (VmRSS, and its peak VmHWM). The
# machine is noisy: compare rows of one run, not runs.
#
#   tests/bench/run.sh [--bin-dir DIR] [--ingest PATH] [--duration 10s]
#                      [--connections 32] [--devices 4] [--events 2000]
#                      [--latency-ms 5]
#
# Without --bin-dir it builds the release binaries first and uses them;
# --bin-dir takes binaries already built (CI's smoke run passes the debug
# ones). --ingest benchmarks another ingest binary (a build of main, say)
# against the same baseline. --devices, --events and --latency-ms are the
# notifier benchmark's. Needs wrk (scripts/install-test-tools installs it).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bench="$root/tests/bench"

bin_dir="" ingest="" duration=10s connections=32 devices=4 events=2000 latency_ms=5
while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) bin_dir="$2" ;;
    --ingest) ingest="$2" ;;
    --duration) duration="$2" ;;
    --connections) connections="$2" ;;
    --devices) devices="$2" ;;
    --events) events="$2" ;;
    --latency-ms) latency_ms="$2" ;;
    *) sed -n '2,/^set -e/p' "$0" | sed '$d' >&2; exit 2 ;;
  esac
  shift 2
done
# shellcheck source=tests/bench/lib.sh
. "$bench/lib.sh"
bin_dir="$(release_bins "$bin_dir")"
ingest="${ingest:-$bin_dir/ingest}"
command -v wrk >/dev/null || { echo "run.sh: wrk is not installed (scripts/install-test-tools)" >&2; exit 1; }

# "<VmRSS MiB>/<VmHWM MiB>" of the running server.
memory() {
  awk '/^VmRSS/ {rss=$2} /^VmHWM/ {hwm=$2} END {printf "%d/%d MiB", rss/1024, hwm/1024}' "/proc/$server/status"
}

# The server's CPU time so far (user and system, all its threads), in
# clock ticks.
cpu_ticks() {
  awk '{print $14 + $15}' "/proc/$server/stat"
}

baseline_rate=""
# Loads $2 with wrk (environment as post_event.lua reads it) and prints the
# row named $1. Leaves the number of 201s in $created.
row() {
  local name="$1" url="$2" out rate p50 p99 other ratio ticks cpu
  ticks="$(cpu_ticks)"
  out="$(wrk -t1 -c"$connections" -d"$duration" --latency -s "$bench/post_event.lua" "$url")"
  ticks=$(($(cpu_ticks) - ticks))
  rate="$(awk '/Requests\/sec/ {print $2}' <<<"$out")"
  p50="$(awk '$1 == "50%" {print $2}' <<<"$out")"
  p99="$(awk '$1 == "99%" {print $2}' <<<"$out")"
  created="$(sed -n 's/^201: \([0-9]*\), other statuses: \([0-9]*\)$/\1/p' <<<"$out")"
  other="$(sed -n 's/^201: \([0-9]*\), other statuses: \([0-9]*\)$/\2/p' <<<"$out")"
  if [ -z "$rate" ] || [ -z "$created" ] || [ "$created" = 0 ]; then
    echo "run.sh: no result for $name:" >&2
    echo "$out" >&2
    exit 1
  fi
  if [ "$other" != 0 ]; then
    echo "run.sh: $name: $other responses were not 201" >&2
  fi
  baseline_rate="${baseline_rate:-$rate}"
  ratio="$(python3 -c "print(f'{$rate/$baseline_rate:.2f}')")"
  # The server's CPU time per 201: what a request costs, whichever thread
  # it ran on, and less noisy than requests/s when the machine is shared.
  cpu="$(python3 -c "print(f'{$ticks * 1e6 / $(getconf CLK_TCK) / $created:.1f}us')")"
  printf '%-22s %10.0f %6s %9s %9s %9s %15s\n' "$name" "$rate" "$ratio" "$p50" "$p99" "$cpu" "$(memory)"
}

# The value of the sample of ingest's /metrics written exactly $1 (a name
# and its labels), 0 when absent.
metric() {
  curl -s "$base/metrics" | awk -v sample="$1" '$1 == sample { value = $2 } END { printf "%d", value }'
}

echo "wrk -t1 -c$connections -d$duration, one run; ingest: $ingest"
printf '%-22s %10s %6s %9s %9s %9s %15s\n' row req/s ratio p50 p99 CPU/req "RSS now/peak"

# The baseline server, its three routes.
port="$(free_port)"
"$bin_dir/bench-baseline" "127.0.0.1:$port" "$scratch/baseline" normal >/dev/null 2>&1 &
server=$!
wait_up "http://127.0.0.1:$port/"
export TOCSIN_KEY=none BENCH_NOTIFY=false BENCH_IDEMPOTENCY=0
row "baseline" "http://127.0.0.1:$port/v1/events"
row "baseline + SQLite" "http://127.0.0.1:$port/v1/events/sqlite"
row "baseline + store" "http://127.0.0.1:$port/v1/events/store"
stop_server

# Starts ingest in embedded mode on a fresh data directory named $1, with
# the environment assignments that follow, and makes its key.
start_ingest() {
  local data="$scratch/$1"
  shift
  port="$(free_port)"
  base="http://127.0.0.1:$port"
  env "$@" INGEST_DATA_DIR="$data" INGEST_LISTEN="127.0.0.1:$port" INGEST_LOG_FORMAT=json RUST_LOG=warn \
    "$ingest" >"$data.log" 2>&1 &
  server=$!
  wait_up "$base/healthz"
  TOCSIN_KEY="$(INGEST_DATA_DIR="$data" "$ingest" keys create --org bench --project bench --rate-limit 1000000000 2>/dev/null)"
  export TOCSIN_KEY
}

# What syncing every commit costs: the notify:false load on an ingest that
# syncs at checkpoints only, run just before the same load on the default
# one, both on a fresh process and store.
start_ingest ingest-normal INGEST_SQLITE_SYNCHRONOUS=normal
row "synchronous=normal" "$base/v1/events"
stop_server

# Ingest, every row against one process (as one serving would: its memory
# after the run is that of all the events recorded).
start_ingest ingest
total=0
row "notify:false" "$base/v1/events"
total=$((total + created))
BENCH_USERS=1000 row "notify:false, userId" "$base/v1/events"
total=$((total + created))
BENCH_IDEMPOTENCY=1 row "idempotency-key" "$base/v1/events"
total=$((total + created))
BENCH_NOTIFY=true row "notify:true, no device" "$base/v1/events"
total=$((total + created))

for device in 1 2 3 4; do
  curl -sf -o /dev/null -H "Authorization: Bearer $TOCSIN_KEY" -H 'Content-Type: application/json' \
    -d "{\"token\":\"$(printf '%064x' "$device")\",\"environment\":\"sandbox\"}" "$base/v1/devices"
done
delivered() { metric 'tocsin_notifier_pushes_total{outcome="delivered"}'; }
# Counted by the server: wrk leaves out the requests in flight when it stops.
recorded() { metric 'tocsin_http_requests_total{method="POST",route="/v1/events",status="201"}'; }
pushed_before="$(delivered)" recorded_before="$(recorded)"
BENCH_NOTIFY=true row "notify:true, 4 devices" "$base/v1/events"
total=$((total + created))
# The backlog: pushes of this row's events not sent yet, and events whose
# job is not published yet.
stopped="$(date +%s.%N)"
pushes=$((4 * ($(recorded) - recorded_before)))
drained=""
for _ in $(seq 1200); do
  left=$((pushes - ($(delivered) - pushed_before)))
  if [ "$left" -le 0 ] && [ "$(metric tocsin_outbox_backlog)" = 0 ]; then
    drained="$(python3 -c "print(f'{$(date +%s.%N) - $stopped:.2f}')")"
    break
  fi
  sleep 0.05
done
if [ -z "$drained" ]; then
  echo "  backlog NOT drained 60 s after the load: $left pushes left"
elif python3 -c "import sys; sys.exit(0 if $drained <= 2 else 1)"; then
  echo "  backlog 0 within 2 s after the load: yes ($drained s; $pushes pushes)"
else
  echo "  backlog 0 within 2 s after the load: no (drained after $drained s; $pushes pushes)"
fi
echo "ingest after $total events: RSS now/peak $(memory)"
stop_server


echo
"$bin_dir/bench-notifier" --devices "$devices" --events "$events" --latency-ms "$latency_ms"

#!/usr/bin/env bash
# Instructions per request, counted by valgrind's callgrind: the baseline
# server (tests/bench/baseline.rs, both its routes) and ingest's
# POST /v1/events (notify:false), each loaded by wrk (-t1 -c8) while
# callgrind counts, and the counts divided by the 201s wrk saw. Unlike
# requests/s on this noisy machine, a count barely moves from run to run
# (a few per cent: batches of the group commit differ in size, and idle
# workers poll), so a change to the request path shows in it. It counts
# user space only, and weighs every instruction alike (a `rep movsb` copy
# counts once per byte), so a change it favours must still show in the
# CPU time of tests/bench/run.sh or compare.sh before it is kept. Ingest is
# counted per thread: its runtime's workers and the SQLite connection's
# thread, which commits every batch.
#
#   tests/bench/instructions.sh [--bin-dir DIR] [--ingest PATH] [--duration 15s]
#
# Needs valgrind (Debian's package) and wrk.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bench="$root/tests/bench"

bin_dir="" ingest="" duration=15s
while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) bin_dir="$2" ;;
    --ingest) ingest="$2" ;;
    --duration) duration="$2" ;;
    *) sed -n '2,/^set -e/p' "$0" | sed '$d' >&2; exit 2 ;;
  esac
  shift 2
done
# shellcheck source=tests/bench/lib.sh
. "$bench/lib.sh"
bin_dir="$(release_bins "$bin_dir")"
ingest="${ingest:-$bin_dir/ingest}"
for tool in valgrind callgrind_control wrk; do
  command -v "$tool" >/dev/null || { echo "instructions.sh: $tool is not installed" >&2; exit 1; }
done

# Starts "$@" under callgrind, a file of counts per thread in $scratch/$name.
under_callgrind() {
  local name="$1"
  shift
  mkdir -p "$scratch/$name"
  valgrind --tool=callgrind --separate-threads=yes \
    --callgrind-out-file="$scratch/$name/callgrind.out.%p" "$@" >"$scratch/$name.log" 2>&1 &
  server=$!
}

# Loads $2 for a moment, zeroes the counts, loads it for $duration and
# dumps them; prints the row named $1: instructions per 201, in all (and
# as a multiple of the baseline row's) and per thread (threads under 1,000
# a request left out: the process's own timers and signal handling).
row() {
  local name="$1" url="$2" out created
  wrk -t1 -c8 -d2s -s "$bench/post_event.lua" "$url" >/dev/null
  callgrind_control --zero "$server" >/dev/null 2>&1
  out="$(wrk -t1 -c8 -d"$duration" -s "$bench/post_event.lua" "$url")"
  callgrind_control --dump="$name" "$server" >/dev/null 2>&1
  created="$(sed -n 's/^201: \([0-9]*\),.*/\1/p' <<<"$out")"
  python3 - "$name" "$created" "$scratch" <<'EOF'
import glob, re, sys
name, created, scratch = sys.argv[1], int(sys.argv[2]), sys.argv[3]
threads = {}
for path in glob.glob(f"{scratch}/*/callgrind.out.*"):
    text = open(path, errors="replace").read()
    if not re.search(rf"^desc: Trigger: .*{re.escape(name)}", text, re.M):
        continue
    total = re.search(r"^(?:summary|totals): *(\d+)", text, re.M)
    thread = re.search(r"^thread: *(\d+)", text, re.M)
    if total and thread:
        threads[int(thread.group(1))] = threads.get(int(thread.group(1)), 0) + int(total.group(1))
per = {t: n // created for t, n in sorted(threads.items()) if n // created >= 1000}
total = sum(per.values())
# The first row is the baseline the others are compared with.
try:
    base = int(open(f"{scratch}/base").read())
except FileNotFoundError:
    base = total
    open(f"{scratch}/base", "w").write(str(total))
print(f"{name:<22} {total:>12,} {total / base:>6.2f} {created:>8}   "
      + "  ".join(f"thread {t}: {n:,}" for t, n in per.items()))
EOF
}

export TOCSIN_KEY=none BENCH_NOTIFY=false BENCH_IDEMPOTENCY=0
printf '%-22s %12s %6s %8s   %s\n' row instr/req x-base requests "by thread"

port="$(free_port)"
under_callgrind baseline "$bin_dir/bench-baseline" "127.0.0.1:$port" "$scratch/baseline.sqlite3" normal
wait_up "http://127.0.0.1:$port/" 120 || { cat "$scratch/baseline.log" >&2; exit 1; }
row baseline "http://127.0.0.1:$port/v1/events"
row baseline-sqlite "http://127.0.0.1:$port/v1/events/sqlite"
stop_server

port="$(free_port)"
mkdir -p "$scratch/data"
export INGEST_DATA_DIR="$scratch/data" INGEST_LISTEN="127.0.0.1:$port" INGEST_LOG_FORMAT=json RUST_LOG=warn
under_callgrind ingest "$ingest"
wait_up "http://127.0.0.1:$port/healthz" 120 || { cat "$scratch/ingest.log" >&2; exit 1; }
TOCSIN_KEY="$("$ingest" keys create --org bench --project bench --rate-limit 1000000000 2>/dev/null)"
export TOCSIN_KEY
row notify-false "http://127.0.0.1:$port/v1/events"

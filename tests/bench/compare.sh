#!/usr/bin/env bash
# Before/after throughput of POST /v1/events: two ingest binaries (say, a
# release build of main and one of a branch), each in embedded mode on a
# fresh SQLite directory, loaded in turn with the same wrk script, round
# after round, so both see the same machine (this one is noisy: compare the
# two within a run, never runs with each other). Needs wrk.
#
#   tests/bench/compare.sh BEFORE_BIN AFTER_BIN [rounds=3] [duration=10s] [connections=32]
#
# BEFORE_ENV and AFTER_ENV add settings to one side, so one build can be
# compared with itself under two settings:
#
#   AFTER_ENV=INGEST_SQLITE_SYNCHRONOUS=normal tests/bench/compare.sh BIN BIN 5 5s
#
# Prints each run's requests/s and p99, then the median of each and the
# ratio after/before.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
before="$1"
after="$2"
rounds="${3:-3}"
duration="${4:-10s}"
connections="${5:-32}"

# Runs one binary under load; prints "<requests/s> <p99>".
run() {
  local bin="$1" settings="$2" data port server key out
  data="$(mktemp -d)"
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  # shellcheck disable=SC2086 # the settings are words: NAME=value ...
  env $settings INGEST_DATA_DIR="$data" INGEST_LISTEN="127.0.0.1:$port" INGEST_LOG_FORMAT=json RUST_LOG=warn \
    "$bin" >/dev/null 2>&1 &
  server=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
  key="$(INGEST_DATA_DIR="$data" "$bin" keys create --org bench --project bench --rate-limit 1000000000 2>/dev/null)"
  out="$(TOCSIN_KEY="$key" wrk -t1 -c"$connections" -d"$duration" --latency \
    -s "$root/tests/bench/post_event.lua" "http://127.0.0.1:$port/v1/events")"
  kill "$server"
  wait "$server" 2>/dev/null || true
  rm -rf "$data"
  if ! grep -q "other statuses: 0$" <<<"$out"; then
    echo "not every request was 201:" >&2
    echo "$out" >&2
  fi
  echo "$(awk '/Requests\/sec/ {print $2}' <<<"$out") $(awk '$1 == "99%" {print $2}' <<<"$out")"
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

b_runs=() a_runs=()
for round in $(seq "$rounds"); do
  b="$(run "$before" "${BEFORE_ENV:-}")"
  a="$(run "$after" "${AFTER_ENV:-}")"
  echo "round $round: before $b   after $a"
  b_runs+=("${b%% *}")
  a_runs+=("${a%% *}")
done
b_med="$(printf '%s\n' "${b_runs[@]}" | median)"
a_med="$(printf '%s\n' "${a_runs[@]}" | median)"
echo "median req/s: before $b_med, after $a_med, after/before $(python3 -c "print(f'{$a_med/$b_med:.2f}')")"

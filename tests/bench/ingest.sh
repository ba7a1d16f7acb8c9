#!/usr/bin/env bash
# Throughput of POST /v1/events on a release build, embedded (SQLite) mode by
# default or MongoDB when MONGODB_URI is set. Needs wrk (apt-get install wrk).
#
#   tests/bench/ingest.sh [duration=20s] [connections=32]
#
# Prints wrk's figures and the count of each status; every request should be 201.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
duration="${1:-20s}"
connections="${2:-32}"
cargo build --release --locked -p ingest --manifest-path "$root/Cargo.toml" >&2
bin="${CARGO_TARGET_DIR:-$root/target}/release/ingest"
data="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
export INGEST_DATA_DIR="$data" INGEST_LISTEN="127.0.0.1:$port" INGEST_LOG_FORMAT=json RUST_LOG=warn
export MONGODB_DATABASE="bench_$(date +%s)"
"$bin" >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
TOCSIN_KEY="$("$bin" keys create --org bench --project bench --rate-limit 1000000000)"
export TOCSIN_KEY
wrk -t2 -c"$connections" -d"$duration" --latency -s "$root/tests/bench/post_event.lua" "http://127.0.0.1:$port/v1/events"
echo "server RSS after the run: $(ps -o rss= -p $server | tr -d ' ') KiB"

# What the benchmark scripts share (sourced by run.sh and instructions.sh):
# a scratch directory and the one server under test, both cleaned up on
# exit; free ports; waiting for a server to answer; the release binaries.
# Expects `root` (the repository) to be set.

me="$(basename "$0")"
scratch="$(mktemp -d)"
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$scratch"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Waits up to $2 seconds (default 30) until $1 answers, or fails.
wait_up() {
  local tries=$(( ${2:-30} * 10 ))
  for _ in $(seq "$tries"); do
    curl -s -o /dev/null "$1" && return 0
    kill -0 "$server" 2>/dev/null || { echo "$me: the server exited" >&2; return 1; }
    sleep 0.1
  done
  echo "$me: $1 did not answer" >&2
  return 1
}

stop_server() {
  kill "$server"
  wait "$server" 2>/dev/null || true
  server=""
}

# The directory of the binaries: $1 when given, or a release build made now.
release_bins() {
  if [ -n "$1" ]; then
    echo "$1"
    return
  fi
  cargo build --release --locked --manifest-path "$root/Cargo.toml" -p ingest -p tocsin-tests --bins >&2
  echo "${CARGO_TARGET_DIR:-$root/target}/release"
}

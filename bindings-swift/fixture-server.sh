# Sourced by bindings-swift/swift-test and bindings-swift/bench (not run on its own).
# start_fixture_server BINARY [STORE]: starts the Rust fixture server on a free loopback port with
# STORE (default the memory store; port 0: the server picks one and prints it on its "listening
# on" line) and sets
# fixture_pid and fixture_url; fails when the server exits or has not started within 10 s. The
# caller stops it: trap 'kill ${fixture_pid:-} 2>/dev/null || true' EXIT.
start_fixture_server() {
  local binary=$1 store=${2:-memory://} out
  out=$(mktemp)
  "$binary" 0 --store "$store" >"$out" &
  fixture_pid=$!
  for _ in $(seq 1 200); do
    grep -q "listening on" "$out" && break
    if ! kill -0 "$fixture_pid" 2>/dev/null; then
      echo "the fixture server $binary exited" >&2
      rm -f "$out"
      return 1
    fi
    sleep 0.05
  done
  # Read once: the server writes nothing more to its stdout, so the file can go now.
  fixture_url=$(sed -n 's/^listening on //p' "$out")
  rm -f "$out"
  if [ -z "$fixture_url" ]; then
    echo "the fixture server $binary did not start within 10 s" >&2
    return 1
  fi
}

#!/usr/bin/env bash
# HTTP load: wrk at 50 connections against an empty Go handler (the ceiling) and against
# leash's POST /v1/limit on the memory store, in one run, on this machine.
# Usage: make bench-http  (DURATION=20s CONNS=50 THREADS=1 to change)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-15s}
CONNS=${CONNS:-50}
THREADS=${THREADS:-1}
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install -y wrk" >&2; exit 1; }
out=.bench; mkdir -p "$out"
go build -o "$out/emptyserver" ./scripts/emptyserver
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

"$out/emptyserver" -addr 127.0.0.1:18090 & pids+=($!)
LEASH_DEV_API_KEY=bench LEASH_HTTP_ADDR=127.0.0.1:18080 LEASH_ADMIN_ADDR=127.0.0.1:19090 LEASH_LOG_LEVEL=warn \
	./bin/leash serve >/dev/null & pids+=($!)
sleep 1

# Many keys so the run is not one hot counter; the limit is high so every check is allowed.
cat > "$out/limit.lua" <<'LUA'
local n = 0
request = function()
  n = n + 1
  local body = '{"namespace":"bench","key":"user-' .. (n % 10000) .. '","limit":1000000000,"window_ms":60000}'
  return wrk.format("POST", "/v1/limit", {["Authorization"]="Bearer bench", ["Content-Type"]="application/json"}, body)
end
LUA
cat > "$out/empty.lua" <<'LUA'
request = function()
  return wrk.format("POST", "/v1/limit", {["Authorization"]="Bearer bench", ["Content-Type"]="application/json"},
    '{"namespace":"bench","key":"user-1","limit":1000000000,"window_ms":60000}')
end
LUA

run() { wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s "$2" "$1"; }
echo "== ceiling: empty Go handler"; run http://127.0.0.1:18090/ "$out/empty.lua" | tee "$out/empty.txt"
echo "== leash POST /v1/limit (memory store)"; run http://127.0.0.1:18080/v1/limit "$out/limit.lua" | tee "$out/leash.txt"
e=$(awk '/Requests\/sec/ {print $2}' "$out/empty.txt"); l=$(awk '/Requests\/sec/ {print $2}' "$out/leash.txt")
echo "ratio leash/empty: $(awk -v l="$l" -v e="$e" 'BEGIN{printf "%.1f%%", 100*l/e}')"

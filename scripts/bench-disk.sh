#!/usr/bin/env bash
# Disk store against memory store: wrk at 50 connections (closed loop) on POST /v1/limit,
# leash on the memory store and leash on the disk store started in turn on the same port,
# alternating ROUNDS times in one run with the same request script, then the median rate
# and p99 of each and the ratios (goal: disk at least 70 % of memory's rate, p99 at most
# twice). The machine is shared, so only the ratios are meaningful.
# Usage: scripts/bench-disk.sh; DURATION=10s CONNS=50 THREADS=1 ROUNDS=3 DISK_SYNC=1s to change.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
DURATION=${DURATION:-10s}
CONNS=${CONNS:-50}
THREADS=${THREADS:-1}
ROUNDS=${ROUNDS:-3}
need wrk wrk
[ -x bin/leash ] || { echo "bin/leash is missing: make build" >&2; exit 1; }

# 10,000 keys so the run is not one hot counter; the limit is high so every check is allowed.
cat > "$out/limit.lua" <<'LUA'
local n = 0
local hdr = {["Authorization"]="Bearer bench", ["Content-Type"]="application/json"}
request = function()
  n = n + 1
  local body = '{"namespace":"bench","key":"user-' .. (n % 10000) .. '","limit":1000000000,"window_ms":60000}'
  return wrk.format("POST", "/v1/limit", hdr, body)
end
LUA

run() { wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s "$out/limit.lua" http://127.0.0.1:18080/v1/limit; }
rps() { awk '/Requests\/sec/ {print $2}' "$1"; }
p99() { awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us$/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v*=1000}; print v}' "$1"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# bench STORE I: a fresh leash on STORE, a warm-up, one measured run into $out/STORE-I.txt.
bench() {
	start_leash "$1"
	run >/dev/null # warm-up: connections, counters, GC heap
	run >"$out/$1-$2.txt"
	grep -q '^Non-2xx' "$out/$1-$2.txt" && { echo "leash($1) answered non-2xx:" >&2; cat "$out/$1-$2.txt" >&2; exit 1; }
	kill "$leash_pid"; wait "$leash_pid" 2>/dev/null || true
}

for i in $(seq "$ROUNDS"); do
	bench memory "$i"
	bench disk "$i"
	printf 'round %d  memory %9s rps p99 %6s ms   disk %9s rps p99 %6s ms\n' "$i" \
		"$(rps "$out/memory-$i.txt")" "$(p99 "$out/memory-$i.txt")" \
		"$(rps "$out/disk-$i.txt")" "$(p99 "$out/disk-$i.txt")"
done
mr=$(for i in $(seq "$ROUNDS"); do rps "$out/memory-$i.txt"; done | median)
dr=$(for i in $(seq "$ROUNDS"); do rps "$out/disk-$i.txt"; done | median)
mp=$(for i in $(seq "$ROUNDS"); do p99 "$out/memory-$i.txt"; done | median)
dp=$(for i in $(seq "$ROUNDS"); do p99 "$out/disk-$i.txt"; done | median)
echo "median: memory $mr rps p99 $mp ms, disk $dr rps p99 $dp ms;" \
	"disk/memory rate $(awk -v d="$dr" -v m="$mr" 'BEGIN{printf "%.1f%%", 100*d/m}')," \
	"p99 $(awk -v d="$dp" -v m="$mp" 'BEGIN{printf "%.2fx", d/m}')"

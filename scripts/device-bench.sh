#!/usr/bin/env bash
# Runs the pinned load benchmarks (bench-load, bench-grpc, bench-cluster) from a bundle made by
# scripts/device-bundle.sh, on a machine with no Go, no network and no Redis: unpacks the
# bundle into WORK (default a new folder under /tmp), checks that every tool starts, and runs
# each PART given (load, grpc, cluster; default all three) with leash-before and leash-after
# measured in the same run (and envoyproxy/ratelimit in the gRPC runs when the bundle has it).
# Each part's table goes to $OUT/PART.md (and its progress, one row
# per run as it is measured, to $OUT/PART.log, kept if the part is cut short), the servers' and
# Redis's logs to $OUT/PART/.
# CPU sets on 16 or more CPUs (otherwise the scripts' 2-core defaults): Redis on 1-3 (one node on
# CPU 1, three masters on 1, 2, 3), the server on 4-7 with GOMAXPROCS=4, the load tool on 8-15;
# the cluster part (1, 3 and 6 masters) Redis on 1-6, the server on 7-10, the load tool on 11-15.
# Every variable of the bench scripts passes through (DURATION, LOADS, ROUNDS, REDIS_CPUS, ...).
# Usage: OUT=/results bash BUNDLE/scripts/device-bench.sh [load] [grpc] [cluster]
set -euo pipefail
bundle=$(cd "$(dirname "$0")/.." && pwd)
: "${OUT:?OUT must name the folder for the results}"
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
work=${WORK:-$(mktemp -d /tmp/leash-bench.XXXXXX)}
parts=${*:-load grpc cluster}

if [ ! -x "$work/bin/leash-after" ]; then
	mkdir -p "$work"
	"$bundle/boot/ld-linux-x86-64.so.2" --library-path "$bundle/boot" "$bundle/boot/xz" -dc "$bundle/payload.tar.xz" |
		tar -x -C "$work"
fi
rm -rf "$work/scripts" && cp -r "$bundle/scripts" "$work/scripts"
cd "$work"
export PATH="$work/bin:$PATH"
{
	cat "$bundle/README.txt"
	for t in leash-before leash-after; do echo "$t: $("bin/$t" version)"; done
	redis-server --version
	redis-cli --version
	wrk --version 2>&1 | head -1 || true # wrk prints its version and exits 1
	ghz --version
	vegeta -version | head -1
	jq --version
	taskset -c 0 true && echo "taskset works"
	for t in leash-before redis-server redis-cli wrk ghz vegeta jq taskset; do echo "$t: $(command -v "$t")"; done
	echo "$(nproc --all) CPUs: $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
} 2>&1 | tee "$OUT/tools.txt"

big=
[ "$(nproc --all)" -ge 16 ] && big=1
for part in $parts; do
	case $part in
	load | grpc) cpus=(1-3 4-7 8-15) ;;
	cluster) cpus=(1-6 7-10 11-15) ;;
	*) echo "unknown part $part (load, grpc or cluster)" >&2; exit 1 ;;
	esac
	layout=()
	if [ -n "$big" ]; then
		layout=(REDIS_CPUS="${REDIS_CPUS:-${cpus[0]}}" SERVER_CPUS="${SERVER_CPUS:-${cpus[1]}}" LOAD_CPUS="${LOAD_CPUS:-${cpus[2]}}"
			GOMAXPROCS="${GOMAXPROCS:-4}" WRK_THREADS="${WRK_THREADS:-8}")
	fi
	echo "== $part ${layout[*]}" >&2
	[ -x bin/peer-ratelimit ] && layout+=(PEER_BIN="${PEER_BIN-bin/peer-ratelimit}")
	env "${layout[@]}" BENCH_OUT="$OUT/$part" BEFORE_BIN=bin/leash-before AFTER_BIN=bin/leash-after \
		bash "scripts/bench-$part.sh" >"$OUT/$part.md" 2> >(tee "$OUT/$part.log" >&2) || echo "$part failed: $OUT/$part.log" >&2
	cat "$OUT/$part.md"
	rm -rf "$OUT/$part/bin" "$OUT/$part"/targets-*.json "$OUT/$part/rls-data.json" # bulky inputs, rebuilt each run
done

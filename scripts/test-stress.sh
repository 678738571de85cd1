#!/usr/bin/env bash
# make test-stress: the unit suites under load, so that a test which depends on timing
# fails here rather than on a busy CI machine. Each round runs PARALLEL copies of
# `go test -race -count=1` over the same packages at once, beside a CPU hog (one busy
# loop per core); the round passes when every copy passes. It stops at the first failing
# round (with KEEP_GOING=1 it runs every round and fails at the end) and prints the
# failures; the full logs stay in the folder it names.
#
#   scripts/test-stress.sh              every package but ./tests/... (see below)
#   scripts/test-stress.sh ./engine/... only the packages named (any go list patterns)
#
# ./tests/... is left out: the reliability, clients, console, doctest and OpenAPI suites
# drive whole leash processes, browsers and client toolchains over wall-clock phases and
# are run alone by make test (and reliability-long); everything else, the Redis and
# process-starting tests of cmd/leash and store/redisstore included, is in.
#
# Environment:
#   ROUNDS    rounds; default 5
#   PARALLEL  copies of the suite per round; default 2
#   HOGS      busy loops beside them; default: the number of cores
#   KEEP_GOING  1: run every round even after one failed
#   GO        the go command; default go
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
ROUNDS=${ROUNDS:-5}
PARALLEL=${PARALLEL:-2}
HOGS=${HOGS:-$(nproc)}
KEEP_GOING=${KEEP_GOING:-0}
if [ $# -gt 0 ]; then
	mapfile -t pkgs < <($GO list "$@")
else
	mapfile -t pkgs < <($GO list ./... | grep -v '/tests/')
fi
logs=$(mktemp -d "${TMPDIR:-/tmp}/leash-test-stress.XXXXXX")

hogs=()
stop_hogs() {
	for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${hogs[@]}"; do wait "$p" 2>/dev/null || true; done
	hogs=()
}
trap stop_hogs EXIT

# Build once, before the hog starts, so the rounds time the tests.
$GO test -race -count=1 -run '^$' "${pkgs[@]}" >"$logs/build.log" 2>&1 || { cat "$logs/build.log"; exit 1; }

echo "test-stress: ${#pkgs[@]} packages, $ROUNDS rounds of $PARALLEL parallel copies beside $HOGS busy loops; logs in $logs"
for _ in $(seq "$HOGS"); do
	(while :; do :; done) &
	hogs+=($!)
done
for round in $(seq "$ROUNDS"); do
	start=$(date +%s)
	runs=()
	for copy in $(seq "$PARALLEL"); do
		$GO test -race -count=1 -timeout 15m "${pkgs[@]}" >"$logs/round$round.copy$copy.log" 2>&1 &
		runs+=($!)
	done
	failed=0
	for i in "${!runs[@]}"; do
		if ! wait "${runs[$i]}"; then
			failed=1
			echo "test-stress: round $round, copy $((i + 1)) failed:"
			grep -E -e '^(--- FAIL|FAIL|panic:)' -e '_test\.go:[0-9]+:' "$logs/round$round.copy$((i + 1)).log" | head -60 || true
		fi
	done
	echo "test-stress: round $round $([ $failed = 0 ] && echo passed || echo FAILED) in $(($(date +%s) - start)) s"
	if [ $failed != 0 ]; then
		failures=$((${failures:-0} + 1))
		if [ "$KEEP_GOING" != 1 ]; then
			exit 1
		fi
	fi
done
if [ "${failures:-0}" != 0 ]; then
	echo "test-stress: $failures of $ROUNDS rounds failed"
	exit 1
fi
echo "test-stress: all $ROUNDS rounds passed"

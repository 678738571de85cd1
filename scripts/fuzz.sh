#!/usr/bin/env bash
# Runs every Go fuzz target of the module, one at a time (go test -fuzz takes one target
# per invocation), each for FUZZTIME, and fails if any target fails.
#
#   scripts/fuzz.sh                 every package (./...)
#   scripts/fuzz.sh ./httpapi       only the packages named (any go list patterns)
#
# Environment:
#   FUZZTIME      time (or count, e.g. 1000x) per target; default 60s
#   FUZZPARALLEL  fuzzing workers per target (go test -parallel); default: GOMAXPROCS
#   FUZZMINIMIZETIME  time spent minimizing each new or failing input; default 5s (with
#                 go's 60 s, minimizing one input can take a short run's whole time in
#                 packages whose large test binaries make each run slow, e.g. ./adapter)
#   GO            the go command; default go
#
# A failing input is written by go test to testdata/fuzz/<Target>/ in its package; commit
# it with the fix so that `go test` replays it from then on.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
FUZZTIME="${FUZZTIME:-60s}"
FUZZMINIMIZETIME="${FUZZMINIMIZETIME:-5s}"
parallel=()
if [ -n "${FUZZPARALLEL:-}" ]; then
	parallel=(-parallel "$FUZZPARALLEL")
fi
patterns=("$@")
if [ "${#patterns[@]}" -eq 0 ]; then
	patterns=(./...)
fi

# go test -list prints each package's matching names, then "ok <package> <time>"
# ("? <package> [no test files]" for a package without tests, "FAIL ..." if it does not
# build). Collect "package target" pairs.
listing="$("$GO" test -list '^Fuzz' "${patterns[@]}")" || {
	printf '%s\n' "$listing" >&2
	echo "fuzz: listing the fuzz targets failed" >&2
	exit 1
}
targets=()
names=()
while IFS= read -r line; do
	case "$line" in
	Fuzz*) names+=("$line") ;;
	ok*)
		pkg="$(awk '{print $2}' <<<"$line")"
		for name in "${names[@]}"; do
			targets+=("$pkg $name")
		done
		names=()
		;;
	*) names=() ;;
	esac
done <<<"$listing"

if [ "${#targets[@]}" -eq 0 ]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi

# deadlineRace reports whether a failed run's log shows only the race of Go's fuzzing
# coordinator at the end of -fuzztime (go.dev/issue/75804, fixed in Go 1.27): the target
# "fails" with a bare "context deadline exceeded", no failing input and no failing seed.
deadlineRace() {
	grep -q '^    context deadline exceeded$' "$1" &&
		! grep -q 'Failing input written to' "$1" &&
		! grep -q -- "--- FAIL: $2/" "$1"
}

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
failed=()
start=$SECONDS
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	echo "fuzz: $name in $pkg for $FUZZTIME"
	if "$GO" test -run='^$' -fuzz="^${name}\$" -fuzztime="$FUZZTIME" -fuzzminimizetime="$FUZZMINIMIZETIME" "${parallel[@]}" "$pkg" 2>&1 | tee "$log"; then
		continue
	fi
	if deadlineRace "$log" "$name"; then
		echo "fuzz: $name: the run ended on Go's fuzztime deadline race (go.dev/issue/75804), not on a failing input; counted as passed"
		continue
	fi
	failed+=("$name ($pkg)")
done

echo "fuzz: ${#targets[@]} targets in $((SECONDS - start)) s"
if [ "${#failed[@]}" -gt 0 ]; then
	printf 'fuzz: FAILED %s\n' "${failed[@]}" >&2
	exit 1
fi

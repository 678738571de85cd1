#!/usr/bin/env bash
# Builds the self-contained folder that scripts/device-bench.sh runs from, on a machine with no
# Go, no network and no Redis: two static builds of leash (BEFORE and AFTER, any git revisions,
# built from git archive in a scratch folder), redis-server, redis-cli, redis-benchmark, wrk,
# jq and taskset with every shared library they load (glibc and its loader included: wrappers
# in bin/ run each through the bundled loader, so the device's own libraries do not matter),
# ghz and vegeta (static Go builds), and the RateLimitService protoset. The big files travel
# in payload.tar.xz (one solid xz stream: the two leash builds share most of their bytes);
# boot/ holds xz and the little it needs to unpack it. PEER_BIN (envoyproxy/ratelimit, a static
# build: CGO_ENABLED=0 go build -ldflags='-s -w' ./src/service_cmd) goes in too when given.
# Usage: scripts/device-bundle.sh DIR [BEFORE [AFTER]]   (BEFORE default main, AFTER default HEAD)
# Needs here: go, git, xz, and Debian's redis-server, redis-tools, wrk, jq (apt-get install -y).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
dir=${1:?usage: scripts/device-bundle.sh DIR [BEFORE [AFTER]]}
before=${2:-main} after=${3:-HEAD}
need redis-server redis-server
need redis-cli redis-tools
need redis-benchmark redis-tools
need wrk wrk
need jq jq
need xz xz-utils
need_go_tool ghz "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION"
need_go_tool vegeta "github.com/tsenart/vegeta/v12@$VEGETA_VERSION"

stage=$(mktemp -d)
trap 'rm -rf "$stage"; cleanup' EXIT
p=$stage/payload
mkdir -p "$p/bin" "$p/libexec" "$p/lib" "$p/share"

# leash REV NAME: a static, stripped leash of git revision REV as bin/leash-NAME.
leash() {
	local src=$stage/src-$2 v
	v=$(git rev-parse --short "$1^{commit}")
	mkdir -p "$src"
	git archive "$v" | tar -x -C "$src"
	echo "building leash $2 at $v ($1)" >&2
	(cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$v" -o "$p/bin/leash-$2" ./cmd/leash)
	echo "$2: $1 = $(git rev-parse "$v")" >>"$stage/revisions"
}
leash "$before" before
leash "$after" after

# libs FILE...: the shared libraries the files load, loader included (ldd).
libs() { ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && $2 ~ /^\(0x/ {print $1}' | sort -u; }
# ELF tools run through the bundled loader; the name they see (argv[0]) is their own.
for t in redis-server redis-cli redis-benchmark wrk jq taskset; do
	cp -L "$(command -v "$t")" "$p/libexec/$t"
	cat >"$p/bin/$t" <<-SH
	#!/bin/sh
	d=\$(dirname "\$(readlink -f "\$0")")/..
	exec "\$d/lib/ld-linux-x86-64.so.2" --library-path "\$d/lib" --argv0 "\$0" "\$d/libexec/$t" "\$@"
	SH
	chmod +x "$p/bin/$t"
done
libs "$p"/libexec/* | xargs -I{} cp -L {} "$p/lib/"
cp "$(command -v ghz)" "$(command -v vegeta)" "$p/bin/"
if [ -n "${PEER_BIN:-}" ]; then
	cp "$PEER_BIN" "$p/bin/peer-ratelimit"
	echo "peer: $PEER_BIN" >>"$stage/revisions"
fi
go run ./scripts/rlsprotoset >"$p/share/rls.protoset"

rm -rf "$dir" && mkdir -p "$dir/boot" "$dir/scripts"
cp scripts/lib.sh scripts/bench-load.sh scripts/bench-grpc.sh scripts/bench-cluster.sh scripts/device-bench.sh "$dir/scripts/"
cp -L "$(command -v xz)" "$dir/boot/xz"
libs "$(command -v xz)" | xargs -I{} cp -L {} "$dir/boot/"
tar -C "$p" -c . | xz -9e -T1 >"$dir/payload.tar.xz"
{
	echo "leash load bundle, made $(date -u '+%Y-%m-%d %H:%M UTC') from $(git rev-parse --short HEAD)"
	cat "$stage/revisions"
	echo "run on the device: OUT=/some/folder bash scripts/device-bench.sh [load] [grpc] [cluster]"
} >"$dir/README.txt"
du -sh "$dir" "$dir/payload.tar.xz" >&2

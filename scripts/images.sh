#!/usr/bin/env bash
# Builds the sandbox images from agentimage/Dockerfile: `images.sh [target...]` (default: base browser; also: node).
# Tags: ${SANDGATE_IMAGE_REPO:-sandgate/sandbox}:<target>. Docker's layer cache makes a rebuild with unchanged inputs
# a no-op, and a changed agent rebuilds only its own layer. Concurrent callers (parallel test packages) are
# serialised with a lock so an image is never built twice at once.
set -euo pipefail
cd "$(dirname "$0")/.."

REPO=${SANDGATE_IMAGE_REPO:-sandgate/sandbox}
BASE_IMAGE=${BASE_IMAGE:-debian:bookworm-slim}
CTX=build/image-context
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(base browser)

mkdir -p build
exec 9>build/.images.lock
flock 9

scripts/prereqs.sh docker base-image

mkdir -p "$CTX"
version=$(git describe --always --dirty 2>/dev/null || echo dev)
# A static, reproducible binary: the same sources give the same bytes, so Docker's cache holds.
CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -buildid= -X main.version=$version" \
	-o "$CTX/sandgate-agent.new" ./agentimage
if cmp -s "$CTX/sandgate-agent.new" "$CTX/sandgate-agent" 2>/dev/null; then
	rm "$CTX/sandgate-agent.new"
else
	mv "$CTX/sandgate-agent.new" "$CTX/sandgate-agent"
fi
chmod 0755 "$CTX/sandgate-agent"

for t in "${targets[@]}"; do
	start=$(date +%s)
	log=build/image-$t.log
	if ! docker build --build-arg "BASE_IMAGE=$BASE_IMAGE" -f agentimage/Dockerfile --target "$t" -t "$REPO:$t" "$CTX" >"$log" 2>&1; then
		tail -n 40 "$log" >&2
		echo "images: building $REPO:$t failed; the whole log is $log" >&2
		exit 1
	fi
	echo "images: $REPO:$t ready ($(( $(date +%s) - start ))s, $(docker image inspect -f '{{.Size}}' "$REPO:$t" | awk '{printf "%.0f MB", $1/1e6}'))" >&2
done

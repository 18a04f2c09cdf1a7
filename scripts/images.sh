#!/usr/bin/env bash
# Builds the sandbox images from agentimage/Dockerfile: `images.sh [target...]` (default: base browser; also: node, r).
# Tags: ${SANDGATE_IMAGE_REPO:-sandgate/sandbox}:<target>. Docker's layer cache makes a rebuild with unchanged inputs
# a no-op, and a changed agent rebuilds only its own layer. Concurrent callers (parallel test packages) are
# serialised with a lock so an image is never built twice at once.
# BuildKit builds when the docker CLI has buildx (it builds only the target's own stages); otherwise the legacy
# builder runs, and the Dockerfile's stage order keeps it to the target's stages too. SANDGATE_BUILDER=legacy|buildkit
# chooses. Progress (the build steps
# and the packages being set up) goes to stderr as it happens; SANDGATE_BUILD_QUIET=1 keeps only the summary.
# Extra `docker build` flags (e.g. --no-cache) come from SANDGATE_BUILD_FLAGS.
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

scripts/prereqs.sh docker base-image node

mkdir -p "$CTX"
version=$(scripts/version.sh)
# A static, reproducible binary: the same sources give the same bytes, so Docker's cache holds.
CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -buildid= -X main.version=$version" \
	-o "$CTX/sandgate-agent.new" ./agentimage
if cmp -s "$CTX/sandgate-agent.new" "$CTX/sandgate-agent" 2>/dev/null; then
	rm "$CTX/sandgate-agent.new"
else
	mv "$CTX/sandgate-agent.new" "$CTX/sandgate-agent"
fi
chmod 0755 "$CTX/sandgate-agent"
# pnpm for the base and browser targets (Bay's Ship image has it), packed once from the npm registry with the host's
# npm and trust store: the build copies the file and never reaches a registry itself.
PNPM_VERSION=9.15.9
if [ ! -s "$CTX/pnpm-$PNPM_VERSION.tgz" ]; then
	(cd "$CTX" && npm pack --silent "pnpm@$PNPM_VERSION" >/dev/null)
fi
cp -p "$CTX/pnpm-$PNPM_VERSION.tgz" "$CTX/pnpm.tgz"

builder=${SANDGATE_BUILDER:-legacy}
if [ -z "${SANDGATE_BUILDER:-}" ] && docker buildx version >/dev/null 2>&1; then
	builder=buildkit
fi
case "$builder" in legacy | buildkit) ;; *) echo "images: SANDGATE_BUILDER is legacy or buildkit, not '$builder'" >&2; exit 1 ;; esac
build() {
	if [ "$builder" = buildkit ]; then
		DOCKER_BUILDKIT=1 docker build --progress=plain "$@"
	else
		DOCKER_BUILDKIT=0 docker build "$@"
	fi
}
# The lines worth showing a person waiting: build steps, and each package apt sets up.
progress() {
	if [ -n "${SANDGATE_BUILD_QUIET:-}" ]; then
		cat >/dev/null
	else
		grep --line-buffered -E '^(Step [0-9]+/[0-9]+ : |#[0-9]+ \[|Setting up |Get:[0-9]+ )' | sed -u -E "s/^(.{0,150}).*/images: $1: \\1/" >&2 || true
	fi
}

for t in "${targets[@]}"; do
	start=$(date +%s)
	log=build/image-$t.log
	echo "images: building $REPO:$t with the $builder builder (log: $log)" >&2
	# shellcheck disable=SC2086 # SANDGATE_BUILD_FLAGS is a list of flags
	if ! build ${SANDGATE_BUILD_FLAGS:-} --build-arg "BASE_IMAGE=$BASE_IMAGE" -f agentimage/Dockerfile --target "$t" -t "$REPO:$t" "$CTX" 2>&1 \
		| tee "$log" | progress "$t"; then # pipefail: the build's own status
		tail -n 40 "$log" >&2
		echo "images: building $REPO:$t failed; the whole log is $log" >&2
		exit 1
	fi
	echo "images: $REPO:$t ready ($(( $(date +%s) - start ))s, $(docker image inspect -f '{{.Size}}' "$REPO:$t" | awk '{printf "%.0f MB", $1/1e6}'))" >&2
done

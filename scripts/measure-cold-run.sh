#!/usr/bin/env bash
# Measures a cold `make run`: the time from a fresh checkout to the gateway's first HTTPS answer, with nothing
# built before. `measure-cold-run.sh [git-ref]` (default HEAD) clones the repository into a temporary directory and
# runs `make run` there with
#   - an empty Go build cache and module cache (every module comes from the proxy, everything compiles),
#   - an empty npm cache and no node_modules (the page assets install from the registry),
#   - a Debian base image tag that does not exist yet (debian:bookworm-cold<pid>), so prereqs.sh debootstraps it and
#     every sandbox image layer builds from it, under an image repository of its own,
#   - its own Caddy data dir, ports, admin address and sandbox namespace, so it disturbs no other gateway.
# It prints one line per phase as `make run` reaches it and the total, then stops the gateway and removes what it made
# (images, base tag, containers, networks and volumes of its namespace, the checkout and caches; KEEP=1 keeps them).
# What it cannot make cold: the Docker engine and host packages (docker.io, debootstrap, node) already installed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
ref=${1:-HEAD}
tag=cold$$
work=$(mktemp -d /var/tmp/sandgate-cold.XXXXXX)
https_port=${COLD_HTTPS_PORT:-18443}
ns=sandgate-$tag
export GOCACHE=$work/gocache GOMODCACHE=$work/gomodcache GOFLAGS=-modcacherw npm_config_cache=$work/npm-cache
export BASE_IMAGE=debian:bookworm-$tag SANDGATE_IMAGE_REPO=sandgate-$tag/sandbox SANDGATE_NAMESPACE=$ns
export SANDGATE_HTTPS_PORT=$https_port SANDGATE_HTTP_PORT=${COLD_HTTP_PORT:-18080} SANDGATE_BAY_PORT=${COLD_BAY_PORT:-18114}
export SANDGATE_ADMIN=localhost:${COLD_ADMIN_PORT:-12019} XDG_DATA_HOME=$work/data XDG_CONFIG_HOME=$work/config

run_pid=
cleanup() {
	if [ -n "$run_pid" ]; then
		kill -- -"$run_pid" 2>/dev/null || true
		wait "$run_pid" 2>/dev/null || true
	fi
	[ -n "${KEEP:-}" ] && { echo "cold-run: kept $work and the images" >&2; return; }
	docker ps -aq --filter "name=^$ns-" | xargs -r docker rm -f >/dev/null 2>&1 || true
	docker volume ls -q --filter "name=^$ns-" | xargs -r docker volume rm >/dev/null 2>&1 || true
	docker network ls -q --filter "name=^$ns-" | xargs -r docker network rm >/dev/null 2>&1 || true
	docker images -q "sandgate-$tag/sandbox" | xargs -r docker rmi -f >/dev/null 2>&1 || true
	docker rmi "$BASE_IMAGE" >/dev/null 2>&1 || true
	rm -rf "$work" "/run/sandgate/$ns"
}
trap cleanup EXIT

git clone -q "$repo" "$work/src"
git -C "$work/src" checkout -q "$(git -C "$repo" rev-parse "$ref")"
echo "cold-run: $(git -C "$work/src" log -1 --format='%h %s' | cut -c1-100)" >&2
echo "cold-run: load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores" >&2

start=$(date +%s)
# setsid: the gateway and every build step are one process group, stopped together at the end.
setsid make -C "$work/src" run >"$work/make-run.log" 2>&1 &
run_pid=$!
seen=""
phase() { # prints a phase the first time its marker shows in the log
	local name=$1 pattern=$2
	case " $seen " in *" $name "*) return ;; esac
	if grep -qE "$pattern" "$work/make-run.log" 2>/dev/null; then
		seen="$seen $name"
		echo "cold-run: +$(( $(date +%s) - start ))s $name" >&2
	fi
}
while :; do
	if ! kill -0 "$run_pid" 2>/dev/null; then
		tail -n 40 "$work/make-run.log" >&2
		echo "cold-run: make run ended before answering" >&2
		exit 1
	fi
	phase assets-done '^assets: '
	phase base-image-debootstrap 'building .* with debootstrap'
	phase image-build-start 'images: building .*:base'
	phase base-image-ready 'images: .*:base ready'
	phase browser-image-ready 'images: .*:browser ready'
	if curl -sk -o /dev/null --max-time 5 "https://localhost:$https_port/health"; then
		break
	fi
	sleep 2
done
total=$(( $(date +%s) - start ))
grep -E '^images: .* ready' "$work/make-run.log" | sed 's/^/cold-run: /' >&2 || true
echo "cold-run: first HTTPS answer after ${total}s ($(( total / 60 )) min $(( total % 60 )) s); load average now: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

#!/usr/bin/env bash
# Makes sure what `make run` and `make test` need is present, installing it only on Debian as root.
#   prereqs.sh docker      a Docker engine answers on the socket (installs docker.io and starts dockerd)
#   prereqs.sh base-image  $BASE_IMAGE exists locally (pulls it, else builds it with debootstrap + docker import)
#   prereqs.sh chromium    /usr/bin/chromium exists (browser tests)
#   prereqs.sh pebble      the pebble ACME test server exists (TLS tests)
#   prereqs.sh redis       redis-server exists (the gateway fleet's shared store: spent tickets, certificates)
#   prereqs.sh node        node and npm exist (browser tests drive Playwright)
#   prereqs.sh stress-ng   stress-ng exists (make test-stress runs the suite beside CPU hogs)
#   prereqs.sh compose     `docker compose` or `docker-compose` exists (the deploy/ compose files are tested)
#   prereqs.sh buildx      the docker CLI has buildx, so images build with BuildKit (optional: nothing requires it)
#   prereqs.sh runsc       gVisor's runsc (pinned, built from the Go module proxy) is the engine's runtime "runsc"
#   prereqs.sh localhost-names  every *.localhost name resolves to loopback for every program (libnss-myhostname)
# Each step is a no-op when its thing is already there. On failure it prints one sentence saying what is missing.
set -euo pipefail

BASE_IMAGE=${BASE_IMAGE:-debian:bookworm-slim}
STATE_DIR=${SANDGATE_STATE_DIR:-/var/tmp/sandgate}

fail() { echo "prereqs: $*" >&2; exit 1; }
note() { echo "prereqs: $*" >&2; }

can_install() {
	[ "$(id -u)" = 0 ] && [ -r /etc/debian_version ] && command -v apt-get >/dev/null
}

apt_updated=0
apt_install() {
	can_install || fail "$1 is missing and this is not Debian as root: install $* yourself."
	if [ "$apt_updated" = 0 ]; then
		# An apt list older than a day is refreshed once per run; fresh lists are reused.
		if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mmin -1440 2>/dev/null | head -n 1)" ]; then
			apt-get update -qq >&2
		fi
		apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2 ||
		fail "could not install $* with apt-get."
}

docker_answers() { docker info >/dev/null 2>&1; }

ensure_docker() {
	docker_answers && return 0
	if ! command -v dockerd >/dev/null; then
		note "no Docker engine answers; installing docker.io"
		apt_install docker.io
	fi
	docker_answers && return 0
	can_install || fail "no Docker engine answers on ${DOCKER_HOST:-/var/run/docker.sock}: start dockerd."
	start_dockerd
}

# start_dockerd starts the engine in a session of its own (setsid), not in the caller's process group: Ctrl-C on
# `make run` signals the terminal's foreground process group, and an engine in it stopped with every sandbox. It
# outlives this script and the gateway; README.md says how to stop it (its pid is in /var/run/docker.pid).
#
# Two engines on one data root fight over its lock files, and the loser exits ("error while opening volume store
# metadata database: timeout"), so starts are serialised: .ci/run ensures the engine from two steps at once (the images
# and runsc's registration), and an engine that is still starting, or still shutting down (a stopped session's, which
# keeps its pid file until it has stopped every container), is waited for rather than raced. An engine that exits
# while starting is started again, twice at most; what it said last is printed, not only its log's name.
DOCKERD_PIDFILE=${DOCKERD_PIDFILE:-/var/run/docker.pid}
DOCKERD_WAIT=${SANDGATE_DOCKERD_WAIT:-120}

# process_alive PID: the process exists and is not a zombie (an engine we started and that exited stays one until
# this shell ends).
process_alive() {
	local state
	state=$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$state" ] && [ "$state" != Z ]
}

# pidfile_engine prints the pid in $DOCKERD_PIDFILE when that process is alive (a stale file, left by kill -9, names
# a dead or reused pid: it is ignored unless the process is alive).
pidfile_engine() {
	local pid
	pid=$(cat "$DOCKERD_PIDFILE" 2>/dev/null || true)
	[ -n "$pid" ] && process_alive "$pid" && echo "$pid"
}

# await_engine PID SECONDS: 0 once the engine answers, 1 once process PID has gone, 2 when SECONDS ran out.
await_engine() {
	local deadline=$((SECONDS + $2))
	while [ "$SECONDS" -lt "$deadline" ]; do
		docker_answers && return 0
		process_alive "$1" || { docker_answers && return 0; return 1; }
		sleep 0.5
	done
	return 2
}

start_dockerd() {
	mkdir -p "$STATE_DIR"
	local rc=0
	# The lock is fd 9, closed for the engine itself (9>&- below): an engine holding it would block every later start.
	exec 9>"$STATE_DIR/dockerd.lock"
	flock 9
	start_dockerd_locked || rc=$?
	exec 9>&-
	return "$rc"
}

start_dockerd_locked() {
	docker_answers && return 0
	local log=$STATE_DIR/dockerd.log pid rc attempt since
	pid=$(pidfile_engine || true)
	if [ -n "$pid" ]; then
		note "dockerd $pid is running but does not answer yet (starting, or shutting down); waiting up to $DOCKERD_WAIT s"
		rc=0
		await_engine "$pid" "$DOCKERD_WAIT" || rc=$?
		[ "$rc" = 0 ] && return 0
		[ "$rc" = 2 ] && fail "dockerd $pid did not answer within $DOCKERD_WAIT s and is still running; stop it (kill $pid) or see its log."
	fi
	for attempt in 1 2 3; do
		since=$(($(stat -c %s "$log" 2>/dev/null || echo 0) + 1))
		note "starting dockerd in its own session (log: $log; stop it with: kill \$(cat $DOCKERD_PIDFILE))"
		printf '== %s prereqs.sh starts dockerd (attempt %s)\n' "$(date -u +%FT%TZ)" "$attempt" >>"$log"
		setsid dockerd >>"$log" 2>&1 </dev/null 9>&- &
		pid=$!
		rc=0
		await_engine "$pid" "$DOCKERD_WAIT" || rc=$?
		[ "$rc" = 0 ] && return 0
		if [ "$rc" = 2 ]; then
			tail -c "+$since" "$log" | tail -n 5 >&2
			fail "dockerd $pid did not answer within $DOCKERD_WAIT s; see $log."
		fi
		note "dockerd exited while starting: $(tail -c "+$since" "$log" | grep -E 'failed to start daemon|level=(fatal|error)' | tail -n 1)"
	done
	tail -c "+$since" "$log" | tail -n 5 >&2
	fail "dockerd exited three times while starting; see $log."
}

ensure_base_image() {
	ensure_docker
	docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 && return 0
	note "pulling $BASE_IMAGE"
	if timeout 60 docker pull -q "$BASE_IMAGE" >/dev/null 2>&1; then return 0; fi
	# Offline: build the same Debian release from Debian's mirror and import it under the expected tag,
	# so our Dockerfiles stay unchanged (FROM $BASE_IMAGE).
	case "$BASE_IMAGE" in
	debian:bookworm*) ;;
	*) fail "$BASE_IMAGE cannot be pulled and only debian:bookworm* can be built locally." ;;
	esac
	command -v debootstrap >/dev/null || apt_install debootstrap
	local root
	root=$(mktemp -d /var/tmp/sandgate-rootfs.XXXXXX)
	note "building $BASE_IMAGE with debootstrap (about 30 s)"
	if ! debootstrap --variant=minbase bookworm "$root" >"$STATE_DIR/debootstrap.log" 2>&1; then
		rm -rf "$root"
		fail "debootstrap failed; see $STATE_DIR/debootstrap.log."
	fi
	# Match the slim image: no apt caches, no docs the image would not ship.
	rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
	tar -C "$root" -c . | docker import -c 'CMD ["bash"]' - "$BASE_IMAGE" >/dev/null
	rm -rf "$root"
}

ensure_chromium() {
	[ -x /usr/bin/chromium ] && return 0
	apt_install chromium fonts-liberation
}

# The tests start their own redis-server on a free loopback port with its own dir; Debian's service is not used
# (the package's postinst may start it on 6379: nothing of ours talks to it).
ensure_redis() {
	command -v redis-server >/dev/null && return 0
	apt_install redis-server
}

ensure_node() {
	command -v node >/dev/null && command -v npm >/dev/null && return 0
	apt_install nodejs npm
}

ensure_pebble() {
	command -v pebble >/dev/null && return 0
	[ -x /usr/bin/pebble ] && return 0
	apt_install pebble
}

# Debian bookworm has no docker-buildx package, and Docker's own download site cannot be reached here, so buildx is
# built from its Go module (a few minutes on 2 idle cores) into the CLI's plugin directory of this user
# ($DOCKER_CONFIG/cli-plugins, default ~/.docker/cli-plugins). Engine 20.10's built-in BuildKit (v0.8) serves it
# through buildx's docker driver. Where Debian has the package (trixie), apt installs it instead.
BUILDX_VERSION=${BUILDX_VERSION:-v0.38.2}
ensure_buildx() {
	ensure_docker
	docker buildx version >/dev/null 2>&1 && return 0
	if can_install && apt-cache show docker-buildx >/dev/null 2>&1; then
		apt_install docker-buildx
		docker buildx version >/dev/null 2>&1 && return 0
	fi
	command -v go >/dev/null || fail "buildx is missing and go is not installed to build it."
	local dir=${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins tmp
	tmp=$(mktemp -d /var/tmp/sandgate-buildx.XXXXXX)
	note "building docker buildx $BUILDX_VERSION from its Go module (log: $STATE_DIR/buildx.log)"
	if ! GOBIN=$tmp go install -trimpath -ldflags "-s -w -X github.com/docker/buildx/version.Version=$BUILDX_VERSION" "github.com/docker/buildx/cmd/buildx@$BUILDX_VERSION" >"$STATE_DIR/buildx.log" 2>&1; then
		rm -rf "$tmp"
		fail "building buildx failed; see $STATE_DIR/buildx.log."
	fi
	mkdir -p "$dir"
	mv "$tmp/buildx" "$dir/docker-buildx"
	rm -rf "$tmp"
	docker buildx version >/dev/null 2>&1 || fail "docker does not load $dir/docker-buildx; see docker buildx version."
}

ensure_stress_ng() {
	command -v stress-ng >/dev/null && return 0
	apt_install stress-ng
}

ensure_compose() {
	docker compose version >/dev/null 2>&1 && return 0
	command -v docker-compose >/dev/null && return 0
	apt_install docker-compose
}

# gVisor's runsc, for profiles with `runtime runsc` (docs/security.md "gVisor"). Debian's package is from 2022 and
# runs a sandbox only with --network=host (gVisor then hands the sandbox's socket calls to the host kernel), so a
# current runsc is built from the Go module proxy at a pinned version into the cache (like cluster.sh's binaries),
# installed as $RUNSC_BIN and registered with the engine with no runtime arguments: runsc's default network mode,
# --network=sandbox, runs gVisor's own network stack (netstack) inside the network namespace Docker made for the
# container, so the sandbox stays on its own veth behind our packet filter and its socket calls never reach the host
# kernel's TCP/IP code. The engine picks the new runtime up on SIGHUP (a reload: dockerd and every container keep
# running); an existing /etc/docker/daemon.json is merged into, never replaced.
RUNSC_VERSION=${RUNSC_VERSION:-v0.0.0-20260527191743-a81fd9dd382e}
RUNSC_CACHE=${SANDGATE_RUNSC_CACHE:-/var/cache/sandgate/runsc}
RUNSC_BIN=${RUNSC_BIN:-/usr/local/bin/runsc}
DOCKER_DAEMON_JSON=${DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}
runsc_registered() {
	docker info --format '{{json .Runtimes}}' 2>/dev/null | jq -e --arg p "$RUNSC_BIN" '.runsc.path == $p' >/dev/null 2>&1
}
ensure_runsc() {
	ensure_docker
	command -v jq >/dev/null || apt_install jq
	local cached=$RUNSC_CACHE/$RUNSC_VERSION/runsc
	if [ -x "$RUNSC_BIN" ] && cmp -s "$cached" "$RUNSC_BIN" && runsc_registered; then return 0; fi
	can_install || fail "runsc is missing or not registered with the engine, and this is not Debian as root: see docs/security.md (gVisor)."
	if [ ! -x "$cached" ]; then
		command -v go >/dev/null || fail "runsc is missing and go is not installed to build it."
		local tmp
		tmp=$(mktemp -d /var/tmp/sandgate-runsc.XXXXXX)
		note "building gVisor's runsc $RUNSC_VERSION from its Go module (about 2 min; log: $STATE_DIR/runsc.log)"
		if ! CGO_ENABLED=0 GOBIN=$tmp go install -trimpath -ldflags "-s -w" "gvisor.dev/gvisor/runsc@$RUNSC_VERSION" >"$STATE_DIR/runsc.log" 2>&1; then
			rm -rf "$tmp"
			fail "building runsc failed; see $STATE_DIR/runsc.log."
		fi
		"$tmp/runsc" --version >/dev/null 2>&1 || { rm -rf "$tmp"; fail "the runsc just built does not run."; }
		mkdir -p "$RUNSC_CACHE/$RUNSC_VERSION"
		mv "$tmp/runsc" "$cached"
		rm -rf "$tmp"
	fi
	install -m 0755 "$cached" "$RUNSC_BIN.new"
	mv "$RUNSC_BIN.new" "$RUNSC_BIN"
	runsc_registered && return 0
	# Merge: every other key (and every other runtime) of an existing file is kept as it is.
	mkdir -p "$(dirname "$DOCKER_DAEMON_JSON")"
	local current='{}'
	if [ -s "$DOCKER_DAEMON_JSON" ]; then
		current=$(jq -e . "$DOCKER_DAEMON_JSON") || fail "$DOCKER_DAEMON_JSON is not valid JSON; fix it, then run again."
	fi
	jq --arg p "$RUNSC_BIN" '.runtimes = ((.runtimes // {}) + {runsc: {path: $p}})' <<<"$current" >"$DOCKER_DAEMON_JSON.new"
	mv "$DOCKER_DAEMON_JSON.new" "$DOCKER_DAEMON_JSON"
	local pid
	pid=$(cat "$DOCKERD_PIDFILE" 2>/dev/null || true)
	[ -n "$pid" ] || pid=$(pgrep -x -o dockerd || true)
	[ -n "$pid" ] || fail "registered runsc in $DOCKER_DAEMON_JSON but found no dockerd to reload; send it SIGHUP."
	note "registering runsc with the engine (SIGHUP to dockerd $pid: a reload, nothing restarts)"
	kill -HUP "$pid"
	for _ in $(seq 1 100); do
		runsc_registered && return 0
		sleep 0.1
	done
	fail "dockerd did not list the runsc runtime within 10 s of SIGHUP; see its log and $DOCKER_DAEMON_JSON."
}

# Browsers and curl resolve *.localhost themselves; Node (the E2B SDKs), Python and Go's cgo resolver ask the system,
# and on Debian only the myhostname NSS module answers for *.localhost (49983-<id>.sandbox.localhost, docs/e2b.md).
# It is added to the hosts line of /etc/nsswitch.conf after "files", keeping every other source in its order.
localhost_names_resolve() { getent ahosts sandgate-check.sandbox.localhost >/dev/null 2>&1; }
ensure_localhost_names() {
	localhost_names_resolve && return 0
	[ -e /lib/x86_64-linux-gnu/libnss_myhostname.so.2 ] || [ -n "$(find /lib /usr/lib -name 'libnss_myhostname.so.2' 2>/dev/null | head -n 1)" ] ||
		apt_install libnss-myhostname
	can_install || fail "*.localhost names do not resolve: add myhostname to the hosts line of /etc/nsswitch.conf."
	if ! grep -qE '^hosts:.*\bmyhostname\b' /etc/nsswitch.conf; then
		sed -i -E 's/^(hosts:[[:space:]]+files)/\1 myhostname/' /etc/nsswitch.conf
		grep -qE '^hosts:.*\bmyhostname\b' /etc/nsswitch.conf || echo 'hosts: files myhostname dns' >>/etc/nsswitch.conf
	fi
	localhost_names_resolve || fail "*.localhost names still do not resolve after adding myhostname to /etc/nsswitch.conf."
}

# Sourced (the tests call start_dockerd with a stand-in dockerd), it only defines the steps.
if [ "${BASH_SOURCE[0]}" != "$0" ]; then
	return 0
fi

mkdir -p "$STATE_DIR"
for what in "$@"; do
	case "$what" in
	docker) ensure_docker ;;
	base-image) ensure_base_image ;;
	chromium) ensure_chromium ;;
	pebble) ensure_pebble ;;
	redis) ensure_redis ;;
	node) ensure_node ;;
	stress-ng) ensure_stress_ng ;;
	compose) ensure_compose ;;
	buildx) ensure_buildx ;;
	runsc) ensure_runsc ;;
	localhost-names) ensure_localhost_names ;;
	*) fail "unknown prerequisite '$what'." ;;
	esac
done

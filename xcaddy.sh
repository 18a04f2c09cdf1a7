#!/usr/bin/env bash
# Builds ./caddy with the sandgate modules.
#   ./xcaddy.sh [--kubernetes] [--version vX.Y.Z] [--with module[@version][=replacement]]... [--output path]
# --kubernetes adds the Kubernetes module of this checkout (kubernetes/, github.com/sandgate/sandgate/kubernetes):
# the fleet binary, with the sandboxes.drivers.kubernetes module (docs/kubernetes.md). Without it no client-go.
# With xcaddy on PATH it runs `xcaddy build --with github.com/sandgate/sandgate=.`; otherwise it builds with plain
# `go build`, in this module (no extra plugins, no version: `go build ./cmd/caddy`) or in a throwaway module that
# replaces sandgate with this checkout and adds the extra plugins, as xcaddy would. Both paths give the same modules.
# XCADDY_GO_BUILD_FLAGS, as with xcaddy, replaces the default go build flags (-trimpath and the tags below) on every
# path; it is split at spaces. The version stamp's -ldflags is added after it, with -s -w (stripped, as Caddy's
# releases) unless DEBUG=1.
set -euo pipefail
cd "$(dirname "$0")"
here=$(pwd)

version="${CADDY_VERSION:-}"
output=./caddy
withs=()
kubernetes=
while [ $# -gt 0 ]; do
	case "$1" in
	--version) version=$2; shift 2 ;;
	--with) withs+=("$2"); shift 2 ;;
	--output) output=$2; shift 2 ;;
	--kubernetes) kubernetes=1; shift ;;
	-h|--help) sed -n '2,11p' "$0"; exit 0 ;;
	*) echo "xcaddy.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
case "$output" in /*) ;; *) output="$here/$output" ;; esac
if [ -n "$kubernetes" ]; then withs+=("github.com/sandgate/sandgate/kubernetes=$here/kubernetes"); fi
# /health and the Bay containers' version: a release tag, or 0.0.0-dev.<commit> (scripts/version.sh).
ldflags="-X github.com/sandgate/sandgate/caddymodule.buildVersion=$(scripts/version.sh)"
# As Caddy's release builds and xcaddy's defaults (-trimpath, -ldflags "-w -s"): no symbol table and no DWARF, 30 MB
# less binary. DEBUG=1 keeps both, for a debugger (dlv) or a core dump. Stack traces and pprof profiles keep their
# function names, files and lines either way: they read the runtime's own table, which -s -w leave in.
if [ -z "${DEBUG:-}" ]; then ldflags="-s -w $ldflags"; fi
# The default flags: -trimpath, and the tags that leave out the Badger, MySQL and PostgreSQL backends of smallstep's
# nosql, which Caddy's pki app never opens (its ACME server's database is bbolt): 47 packages and 6 MB fewer. A
# caller's flags replace the default: a test build without -trimpath reuses the packages `go test` compiled instead
# of compiling every dependency a second time.
read -ra build_flags <<<"${XCADDY_GO_BUILD_FLAGS:--trimpath -tags=nobadger,nomysql,nopgx}"

if command -v xcaddy >/dev/null 2>&1 && [ -z "${SANDGATE_NO_XCADDY:-}" ]; then
	echo "xcaddy.sh: building with xcaddy" >&2
	args=(build ${version:+"$version"} --output "$output" --with "github.com/sandgate/sandgate=$here")
	for w in "${withs[@]}"; do args+=(--with "$w"); done
	# xcaddy splits its flags as a shell would (shlex), so the quoted -ldflags stays one argument.
	XCADDY_GO_BUILD_FLAGS="${build_flags[*]} -ldflags='$ldflags'" exec xcaddy "${args[@]}"
fi

if [ -z "$version" ] && [ ${#withs[@]} -eq 0 ]; then
	echo "xcaddy.sh: xcaddy not found; building with go build ./cmd/caddy" >&2
	exec go build "${build_flags[@]}" -ldflags "$ldflags" -o "$output" ./cmd/caddy
fi
# The Kubernetes module alone: its own cmd/caddy, the same imports as xcaddy's main with both modules.
if [ -z "$version" ] && [ -n "$kubernetes" ] && [ ${#withs[@]} -eq 1 ]; then
	echo "xcaddy.sh: xcaddy not found; building with go build ./cmd/caddy in kubernetes/" >&2
	cd kubernetes
	exec go build "${build_flags[@]}" -ldflags "$ldflags" -o "$output" ./cmd/caddy
fi

# Extra plugins or another Caddy version: a throwaway main module, as xcaddy makes one.
echo "xcaddy.sh: xcaddy not found; building with go build in a temporary module (${version:-caddy from go.mod}${withs[*]:+, with ${withs[*]}})" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
imports=""
for w in "${withs[@]}"; do
	mod=${w%%=*}
	imports+=$'\t_ "'"${mod%%@*}"$'"\n'
done
cat >"$tmp/main.go" <<GO
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/sandgate/sandgate"
$imports)

func main() { caddycmd.Main() }
GO
(
	cd "$tmp"
	go mod init caddy >/dev/null 2>&1
	go mod edit -replace "github.com/sandgate/sandgate=$here"
	go mod edit -require "github.com/sandgate/sandgate@v0.0.0"
	if [ -n "$version" ]; then go get "github.com/caddyserver/caddy/v2@$version"; fi
	for w in "${withs[@]}"; do
		mod=${w%%=*}
		if [ "$mod" != "$w" ]; then
			repl=${w#*=}
			case "$repl" in /*) ;; *) repl="$here/$repl" ;; esac
			go mod edit -replace "${mod%%@*}=$repl"
			go mod edit -require "${mod%%@*}@v0.0.0"
		else
			go get "$mod"
		fi
	done
	go mod tidy
	go build "${build_flags[@]}" -ldflags "$ldflags" -o "$output" .
)

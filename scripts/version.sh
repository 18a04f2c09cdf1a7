#!/usr/bin/env bash
# Prints the semantic version of this checkout for builds: the tag (without its "v") when HEAD is exactly a clean
# release tag vX.Y.Z, else 0.0.0-dev.<commit> (".dirty" with uncommitted changes), else 0.0.0-dev outside git.
# The gateway (xcaddy.sh) and the agent (images.sh) are stamped with it; /health and the containers report it.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! hash=$(git rev-parse --short=12 HEAD 2>/dev/null); then
	echo 0.0.0-dev
	exit 0
fi
dirty=""
git diff --quiet HEAD -- 2>/dev/null || dirty=".dirty"
if [ -z "$dirty" ] && tag=$(git describe --tags --exact-match --match 'v[0-9]*.[0-9]*.[0-9]*' 2>/dev/null); then
	v=${tag#v}
	if [[ $v =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]]; then
		echo "$v"
		exit 0
	fi
fi
# The commit is a pre-release identifier (Bay's clients match ^\d+\.\d+\.\d+(-[a-zA-Z0-9.]+)?$, no "+"); an
# all-digit hash gets git's "g" in front, since semver forbids a numeric identifier with a leading zero.
[[ $hash =~ ^[0-9]+$ ]] && hash=g$hash
echo "0.0.0-dev.$hash$dirty"

#!/usr/bin/env bash
# Builds derived images for profiles that list apt or node dependencies: `profile-images.sh <profiles.json>`.
# A sandbox runs as a non-root user on a read-only root filesystem, so apt cannot install anything at runtime; the
# packages are baked into an image built FROM the profile's image instead. Node packages (`dependencies.node`,
# {name: version}) can install at create into the workspace, or be baked here into /opt/sandgate/node (on NODE_PATH),
# so every sandbox of the profile starts with them and no registry is needed at runtime. The file is a JSON array of
# profiles (or {"profiles": [...]}, as a BAY_PROFILES document); each profile with `dependencies.apt` or
# `dependencies.node` gets
#   ${SANDGATE_IMAGE_REPO:-sandgate/sandbox}:profile-<id>
# (the profile's `apt_mirror`, if any, is the package source during the build). Use that tag as the profile's image.
set -euo pipefail
cd "$(dirname "$0")/.."

file=${1:?usage: profile-images.sh <profiles.json>}
command -v jq >/dev/null || { echo "profile-images: jq is required (apt-get install jq)" >&2; exit 1; }
REPO=${SANDGATE_IMAGE_REPO:-sandgate/sandbox}
mkdir -p build

profiles=$(jq -c 'if type == "array" then . else .profiles end | .[] | select(((.dependencies.apt // []) | length > 0) or ((.dependencies.node // {}) | length > 0))' "$file")
[ -n "$profiles" ] || { echo "profile-images: no profile in $file lists apt or node dependencies" >&2; exit 0; }

while IFS= read -r p; do
	id=$(jq -r .id <<<"$p")
	image=$(jq -r .image <<<"$p")
	mirror=$(jq -r '.apt_mirror // ""' <<<"$p")
	mapfile -t pkgs < <(jq -r '(.dependencies.apt // [])[]' <<<"$p")
	mapfile -t nodepkgs < <(jq -r '(.dependencies.node // {}) | to_entries[] | if .value == "" or .value == "*" then .key else .key + "@" + .value end' <<<"$p")
	[[ $id =~ ^[a-z0-9][a-z0-9._-]{0,62}$ ]] || { echo "profile-images: bad profile id '$id'" >&2; exit 1; }
	for pkg in "${pkgs[@]}"; do
		# The same strict pattern the API applies: nothing reaches apt's command line that could be an option.
		[[ $pkg =~ ^[a-z0-9][a-z0-9+.-]{1,100}(=[A-Za-z0-9.+~:-]{1,64})?$ ]] || { echo "profile-images: profile $id: bad apt package '$pkg'" >&2; exit 1; }
	done
	for pkg in "${nodepkgs[@]}"; do
		# The agent's own patterns for npm names and versions: nothing that npm could read as an option or a URL.
		[[ $pkg =~ ^(@[a-z0-9][a-z0-9._-]{0,100}/)?[a-z0-9][a-z0-9._-]{0,213}(@[0-9A-Za-z.^~*+-]{1,64})?$ ]] || { echo "profile-images: profile $id: bad node package '$pkg'" >&2; exit 1; }
	done
	npm_registry=$(jq -r '.npm_registry // ""' <<<"$p")
	[[ -z $npm_registry || $npm_registry =~ ^https?://[A-Za-z0-9.:/_~%-]+$ ]] || { echo "profile-images: profile $id: bad npm_registry '$npm_registry'" >&2; exit 1; }
	[[ -z $mirror || $mirror =~ ^https?://[A-Za-z0-9.:/_~%-]+$ ]] || { echo "profile-images: profile $id: bad apt_mirror '$mirror'" >&2; exit 1; }
	tag="$REPO:profile-$id"
	log=build/profile-image-$id.log
	start=$(date +%s)
	if ! docker build --build-arg "BASE=$image" --build-arg "PKGS=${pkgs[*]}" --build-arg "MIRROR=$mirror" --build-arg "NODE_PKGS=${nodepkgs[*]}" --build-arg "NPM_REGISTRY=$npm_registry" -t "$tag" - >"$log" 2>&1 <<'DOCKERFILE'
ARG BASE
FROM ${BASE}
ARG PKGS
ARG MIRROR
ARG NODE_PKGS
ARG NPM_REGISTRY
ARG DEBIAN_FRONTEND=noninteractive
USER root
RUN set -e; \
    [ -n "$PKGS" ] || exit 0; \
    if [ -n "$MIRROR" ]; then \
      . /etc/os-release; \
      printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$MIRROR" "$VERSION_CODENAME" "$VERSION_CODENAME" \
        > /etc/apt/sources.list.d/00-sandgate-mirror.sources; \
    fi; \
    apt-get update; \
    apt-get install -y --no-install-recommends $PKGS; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/*
RUN set -e; \
    [ -n "$NODE_PKGS" ] || exit 0; \
    mkdir -p /opt/sandgate/node; \
    npm install --prefix /opt/sandgate/node --no-audit --no-fund --no-update-notifier --cache /tmp/npm-cache \
      ${NPM_REGISTRY:+--registry "$NPM_REGISTRY"} $NODE_PKGS; \
    rm -rf /tmp/npm-cache
ENV NODE_PATH=/opt/sandgate/node/node_modules
USER 65532:65532
DOCKERFILE
	then
		tail -n 30 "$log" >&2
		echo "profile-images: building $tag for profile $id failed; the whole log is $log" >&2
		exit 1
	fi
	echo "profile-images: profile $id -> $tag (${pkgs[*]}${nodepkgs[*]:+ node: ${nodepkgs[*]}}; $(( $(date +%s) - start ))s); set it as the profile's image" >&2
done <<<"$profiles"

#!/usr/bin/env bash
# Builds derived images for profiles that list apt dependencies: `profile-images.sh <profiles.json>`.
# A sandbox runs as a non-root user on a read-only root filesystem, so apt cannot install anything at runtime; the
# packages are baked into an image built FROM the profile's image instead. The file is a JSON array of profiles (or
# {"profiles": [...]}, as a BAY_PROFILES document); each profile with `dependencies.apt` gets
#   ${SANDGATE_IMAGE_REPO:-sandgate/sandbox}:profile-<id>
# (the profile's `apt_mirror`, if any, is the package source during the build). Use that tag as the profile's image.
set -euo pipefail
cd "$(dirname "$0")/.."

file=${1:?usage: profile-images.sh <profiles.json>}
command -v jq >/dev/null || { echo "profile-images: jq is required (apt-get install jq)" >&2; exit 1; }
REPO=${SANDGATE_IMAGE_REPO:-sandgate/sandbox}
mkdir -p build

profiles=$(jq -c 'if type == "array" then . else .profiles end | .[] | select((.dependencies.apt // []) | length > 0)' "$file")
[ -n "$profiles" ] || { echo "profile-images: no profile in $file lists apt dependencies" >&2; exit 0; }

while IFS= read -r p; do
	id=$(jq -r .id <<<"$p")
	image=$(jq -r .image <<<"$p")
	mirror=$(jq -r '.apt_mirror // ""' <<<"$p")
	mapfile -t pkgs < <(jq -r '.dependencies.apt[]' <<<"$p")
	[[ $id =~ ^[a-z0-9][a-z0-9._-]{0,62}$ ]] || { echo "profile-images: bad profile id '$id'" >&2; exit 1; }
	for pkg in "${pkgs[@]}"; do
		# The same strict pattern the API applies: nothing reaches apt's command line that could be an option.
		[[ $pkg =~ ^[a-z0-9][a-z0-9+.-]{1,100}(=[A-Za-z0-9.+~:-]{1,64})?$ ]] || { echo "profile-images: profile $id: bad apt package '$pkg'" >&2; exit 1; }
	done
	[[ -z $mirror || $mirror =~ ^https?://[A-Za-z0-9.:/_~%-]+$ ]] || { echo "profile-images: profile $id: bad apt_mirror '$mirror'" >&2; exit 1; }
	tag="$REPO:profile-$id"
	log=build/profile-image-$id.log
	start=$(date +%s)
	if ! docker build --build-arg "BASE=$image" --build-arg "PKGS=${pkgs[*]}" --build-arg "MIRROR=$mirror" -t "$tag" - >"$log" 2>&1 <<'DOCKERFILE'
ARG BASE
FROM ${BASE}
ARG PKGS
ARG MIRROR
ARG DEBIAN_FRONTEND=noninteractive
USER root
RUN set -e; \
    if [ -n "$MIRROR" ]; then \
      . /etc/os-release; \
      printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$MIRROR" "$VERSION_CODENAME" "$VERSION_CODENAME" \
        > /etc/apt/sources.list.d/00-sandgate-mirror.sources; \
    fi; \
    apt-get update; \
    apt-get install -y --no-install-recommends $PKGS; \
    rm -rf /var/lib/apt/lists/*
USER 65532:65532
DOCKERFILE
	then
		tail -n 30 "$log" >&2
		echo "profile-images: building $tag for profile $id failed; the whole log is $log" >&2
		exit 1
	fi
	echo "profile-images: profile $id -> $tag (${pkgs[*]}; $(( $(date +%s) - start ))s); set it as the profile's image" >&2
done <<<"$profiles"

#!/usr/bin/env bash
# Builds derived images for profiles that list apt, node or R dependencies: `profile-images.sh <profiles.json>`.
# A sandbox runs as a non-root user on a read-only root filesystem, so apt cannot install anything at runtime; the
# packages are baked into an image built FROM the profile's image instead. The file is a JSON array of profiles (or
# {"profiles": [...]}, as a BAY_PROFILES document); each profile with `dependencies.apt`, `.node` or `.r` gets
#   ${SANDGATE_IMAGE_REPO:-sandgate/sandbox}:profile-<id>
# Use that tag as the profile's image.
#   apt   the packages, from the profile's `apt_mirror` when set.
#   node  {name: version} installed into /opt/sandgate/node (on NODE_PATH), from its `npm_registry` when set, so
#         every sandbox of the profile starts with them and needs no registry at create.
#   r     {name: version} mapped to Debian's packages: R package X is `r-cran-<x lowercased>` (R6 -> r-cran-r6,
#         data.table -> r-cran-data.table), installed with apt into R's site library. After the build the image is
#         checked as the sandbox user, without network, with the agent's own R step (rdeps.R): every package must be
#         there, load, and satisfy its version ("" or "*": any; "1.2"/">=1.2": a minimum; ">", "==", "<=", "<").
#         Debian's version is what bookworm ships, not necessarily CRAN's newest; a package Debian lacks fails the
#         build with apt's "Unable to locate package r-cran-..." (install it at create from a cran_mirror instead).
#         Bioconductor and other non-CRAN packages go in dependencies.apt by their Debian names (r-bioc-...).
#         The agent finds these packages present at create and installs nothing.
#
# Networks that intercept TLS (a corporate proxy with its own CA): the build container trusts only Debian's CA
# bundle, so npm fails with SELF_SIGNED_CERT_IN_CHAIN / UNABLE_TO_GET_ISSUER_CERT_LOCALLY where the host's npm works
# (the host trusts the proxy's CA through its system bundle and npm's `cafile`). The build therefore trusts
#   SANDGATE_BUILD_CA=<PEM file>   the CA bundle npm uses during the build (NODE_EXTRA_CA_CERTS);
#                                  default: the host npm's `cafile`, else $NODE_EXTRA_CA_CERTS; `none` for neither.
# It is used in a build stage of its own and never lands in the derived image. The host's HTTP_PROXY, HTTPS_PROXY,
# NO_PROXY, ALL_PROXY (either case) go to the build as Docker's proxy build arguments (kept out of the image's history);
# a proxy on the host's loopback is not reachable from a build container: give its bridge address, or set
# SANDGATE_BUILD_NETWORK=host (docker build --network host).
set -euo pipefail
cd "$(dirname "$0")/.."

file=${1:?usage: profile-images.sh <profiles.json>}
command -v jq >/dev/null || { echo "profile-images: jq is required (apt-get install jq)" >&2; exit 1; }
REPO=${SANDGATE_IMAGE_REPO:-sandgate/sandbox}
mkdir -p build

profiles=$(jq -c 'if type == "array" then . else .profiles end | .[] | select(((.dependencies.apt // []) | length > 0) or ((.dependencies.node // {}) | length > 0) or ((.dependencies.r // {}) | length > 0))' "$file")
[ -n "$profiles" ] || { echo "profile-images: no profile in $file lists apt, node or r dependencies" >&2; exit 0; }

# The CA bundle npm trusts during the build.
ca=${SANDGATE_BUILD_CA:-}
ca_from="SANDGATE_BUILD_CA"
if [ -z "$ca" ]; then
	if command -v npm >/dev/null && c=$(npm config get cafile 2>/dev/null) && [ -n "$c" ] && [ "$c" != null ] && [ -r "$c" ]; then
		ca=$c ca_from="the host npm's cafile"
	elif [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -r "$NODE_EXTRA_CA_CERTS" ]; then
		ca=$NODE_EXTRA_CA_CERTS ca_from="NODE_EXTRA_CA_CERTS"
	fi
fi
[ "$ca" = none ] && ca=""
if [ -n "$ca" ] && ! grep -q -- '-----BEGIN CERTIFICATE-----' "$ca" 2>/dev/null; then
	echo "profile-images: $ca_from $ca is not a readable PEM certificate bundle" >&2
	exit 1
fi

# The build context: the Dockerfile and the CA bundle (empty when none), nothing else.
ctx=$(mktemp -d build/profile-image-context.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
if [ -n "$ca" ]; then cp "$ca" "$ctx/build-ca.pem"; else : >"$ctx/build-ca.pem"; fi
cat >"$ctx/Dockerfile" <<'DOCKERFILE'
ARG BASE
FROM ${BASE} AS packages
ARG PKGS
ARG MIRROR
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
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log

# npm runs in a stage of its own: the CA bundle it trusts stays out of the derived image's layers.
FROM packages AS node-packages
ARG NODE_PKGS
ARG NPM_REGISTRY
COPY build-ca.pem /tmp/sandgate-build-ca.pem
RUN set -e; \
    mkdir -p /opt/sandgate/node; \
    [ -n "$NODE_PKGS" ] || exit 0; \
    if [ -s /tmp/sandgate-build-ca.pem ]; then export NODE_EXTRA_CA_CERTS=/tmp/sandgate-build-ca.pem; fi; \
    npm install --prefix /opt/sandgate/node --no-audit --no-fund --no-update-notifier --cache /tmp/npm-cache \
      ${NPM_REGISTRY:+--registry "$NPM_REGISTRY"} $NODE_PKGS; \
    rm -rf /tmp/npm-cache

FROM packages
COPY --from=node-packages /opt/sandgate/node /opt/sandgate/node
ENV NODE_PATH=/opt/sandgate/node/node_modules
USER 65532:65532
DOCKERFILE

proxy_args=()
for v in HTTP_PROXY HTTPS_PROXY NO_PROXY ALL_PROXY http_proxy https_proxy no_proxy all_proxy; do
	if [ -n "${!v:-}" ]; then proxy_args+=(--build-arg "$v=${!v}"); fi
done
if [ -n "${SANDGATE_BUILD_NETWORK:-}" ]; then proxy_args+=(--network "$SANDGATE_BUILD_NETWORK"); fi
# As scripts/images.sh: BuildKit where the docker CLI has buildx, else the legacy builder (the Dockerfile suits both);
# SANDGATE_BUILDER=legacy|buildkit chooses.
case "${SANDGATE_BUILDER:-}" in
legacy) buildkit=0 ;;
buildkit) buildkit=1 ;;
"") buildkit=0; if docker buildx version >/dev/null 2>&1; then buildkit=1; fi ;;
*) echo "profile-images: SANDGATE_BUILDER is legacy or buildkit, not '$SANDGATE_BUILDER'" >&2; exit 1 ;;
esac

while IFS= read -r p; do
	id=$(jq -r .id <<<"$p")
	image=$(jq -r .image <<<"$p")
	mirror=$(jq -r '.apt_mirror // ""' <<<"$p")
	mapfile -t pkgs < <(jq -r '(.dependencies.apt // [])[]' <<<"$p")
	mapfile -t nodepkgs < <(jq -r '(.dependencies.node // {}) | to_entries[] | if .value == "" or .value == "*" then .key else .key + "@" + .value end' <<<"$p")
	mapfile -t rpkgs < <(jq -r '(.dependencies.r // {}) | to_entries[] | .key + " " + (if .value == "" then "*" else .value end)' <<<"$p")
	[[ $id =~ ^[a-z0-9][a-z0-9._-]{0,62}$ ]] || { echo "profile-images: bad profile id '$id'" >&2; exit 1; }
	for pkg in "${pkgs[@]}"; do
		# The same strict pattern the API applies: nothing reaches apt's command line that could be an option.
		[[ $pkg =~ ^[a-z0-9][a-z0-9+.-]{1,100}(=[A-Za-z0-9.+~:-]{1,64})?$ ]] || { echo "profile-images: profile $id: bad apt package '$pkg'" >&2; exit 1; }
	done
	for pkg in "${nodepkgs[@]}"; do
		# The agent's own patterns for npm names and versions: nothing that npm could read as an option or a URL.
		[[ $pkg =~ ^(@[a-z0-9][a-z0-9._-]{0,100}/)?[a-z0-9][a-z0-9._-]{0,213}(@[0-9A-Za-z.^~*+-]{1,64})?$ ]] || { echo "profile-images: profile $id: bad node package '$pkg'" >&2; exit 1; }
	done
	rcheck=()
	for entry in "${rpkgs[@]}"; do
		name=${entry%% *} version=${entry#* }
		# The agent's patterns (agentapi): CRAN's package names, R versions with an optional comparison.
		[[ $name =~ ^[A-Za-z][A-Za-z0-9.]{0,98}[A-Za-z0-9]$ ]] || { echo "profile-images: profile $id: bad R package '$name'" >&2; exit 1; }
		[[ $version == "*" || $version =~ ^(\>=|\<=|==|\>|\<)?[0-9]{1,9}([.-][0-9]{1,9}){1,5}$ ]] || { echo "profile-images: profile $id: bad version '$version' of R package $name" >&2; exit 1; }
		pkgs+=("r-cran-${name,,}")
		rcheck+=("$name" "${version/#\*/}")
	done
	npm_registry=$(jq -r '.npm_registry // ""' <<<"$p")
	[[ -z $npm_registry || $npm_registry =~ ^https?://[A-Za-z0-9.:/_~%-]+$ ]] || { echo "profile-images: profile $id: bad npm_registry '$npm_registry'" >&2; exit 1; }
	[[ -z $mirror || $mirror =~ ^https?://[A-Za-z0-9.:/_~%-]+$ ]] || { echo "profile-images: profile $id: bad apt_mirror '$mirror'" >&2; exit 1; }
	tag="$REPO:profile-$id"
	log=build/profile-image-$id.log
	start=$(date +%s)
	if [ ${#nodepkgs[@]} -gt 0 ] && [ -n "$ca" ]; then echo "profile-images: npm trusts $ca ($ca_from) during the build" >&2; fi
	# The classic builder keeps a failed step's container (an npm install that fails, say); --force-rm removes it.
	keep_args=(); [ "$buildkit" = 1 ] || keep_args=(--force-rm)
	if ! DOCKER_BUILDKIT=$buildkit docker build "${keep_args[@]}" "${proxy_args[@]}" --build-arg "BASE=$image" --build-arg "PKGS=${pkgs[*]}" --build-arg "MIRROR=$mirror" \
		--build-arg "NODE_PKGS=${nodepkgs[*]}" --build-arg "NPM_REGISTRY=$npm_registry" -t "$tag" "$ctx" >"$log" 2>&1; then
		tail -n 30 "$log" >&2
		echo "profile-images: building $tag for profile $id failed; the whole log is $log" >&2
		exit 1
	fi
	if [ ${#rcheck[@]} -gt 0 ]; then
		# As a sandbox sees it: the sandbox user, a read-only root, no network, and the agent's own check.
		if ! docker run --rm -i --network none --read-only --user 65532:65532 --tmpfs /tmp --entrypoint Rscript "$tag" \
			--no-save --no-restore --no-site-file --no-init-file -e 'source(file("stdin"))' "" "" "${rcheck[@]}" \
			<agentimage/internal/startup/rdeps.R >>"$log" 2>&1; then
			tail -n 10 "$log" >&2
			docker image rm "$tag" >/dev/null 2>&1 || true
			echo "profile-images: $tag for profile $id lacks R packages it lists (removed); the whole log is $log" >&2
			exit 1
		fi
	fi
	echo "profile-images: profile $id -> $tag (${pkgs[*]}${nodepkgs[*]:+ node: ${nodepkgs[*]}}; $(( $(date +%s) - start ))s); set it as the profile's image" >&2
done <<<"$profiles"

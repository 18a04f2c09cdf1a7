#!/usr/bin/env bash
# Copies the third-party files the pages load (xterm.js, its fit addon, noVNC's ES modules and the pako they
# import) from node_modules into routes/pages/web/vendor, which is git-ignored and embedded into the gateway at
# build time. Run it (make assets) before building; a build without it answers the pages with 503.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/npm-deps.sh
src=node_modules
dst=routes/pages/web/vendor
tmp=$(mktemp -d routes/pages/web/.vendor.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/xterm" "$tmp/novnc/vendor"
cp "$src/@xterm/xterm/lib/xterm.mjs" "$src/@xterm/xterm/css/xterm.css" "$src/@xterm/addon-fit/lib/addon-fit.mjs" "$tmp/xterm/"
cp "$src/@xterm/xterm/LICENSE" "$tmp/xterm/LICENSE.txt"
cp -R "$src/@novnc/novnc/core" "$tmp/novnc/core"
cp -R "$src/@novnc/novnc/vendor/pako" "$tmp/novnc/vendor/pako"
cp "$src/@novnc/novnc/LICENSE.txt" "$tmp/novnc/LICENSE.txt"
# Only what a browser loads: no source maps, docs or package metadata.
find "$tmp" -type f ! \( -name '*.js' -o -name '*.mjs' -o -name '*.css' -o -name 'LICENSE*' \) -delete
rm -rf "$dst"
mv "$tmp" "$dst"
trap - EXIT
echo "assets: $(find "$dst" -type f | wc -l) files in $dst" >&2

#!/usr/bin/env bash
# Installs the npm dependencies of package-lock.json into node_modules/ when they are missing or older than the
# lock file. Serialised with a lock: parallel test packages call it.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
exec 9>build/.npm.lock
flock 9
stamp=node_modules/.package-lock.json
if [ -f "$stamp" ] && [ "$stamp" -nt package-lock.json ]; then exit 0; fi
npm ci --no-audit --no-fund --loglevel=error >&2
touch "$stamp"

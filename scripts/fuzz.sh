#!/usr/bin/env bash
# Runs every Go fuzz target (func FuzzXxx) of the module for a bounded time each: `scripts/fuzz.sh 10s` in
# `make test`, longer under `make fuzz`. Targets are found, not listed, so a new FuzzXxx is picked up by itself.
# Plain `go test` already runs each target's seed corpus; this explores beyond it. New crashers are written to the
# package's testdata/fuzz/ by Go; commit them as regression seeds.
set -euo pipefail
fuzztime="${1:-10s}"
cd "$(dirname "$0")/.."
go="${GO:-go}"
status=0
while read -r file; do
	pkg="./$(dirname "$file")"
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
		echo "== $pkg $target ($fuzztime)"
		if ! "$go" test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"; then
			status=1
		fi
	done
done < <(git ls-files --cached --others --exclude-standard '*_test.go' | xargs grep -l '^func Fuzz' | sort -u)
exit $status

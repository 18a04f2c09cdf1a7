#!/usr/bin/env bash
# Runs every Go fuzz target (func FuzzXxx) of the repository's Go modules (the gateway's and kubernetes/) for a
# bounded time each: `scripts/fuzz.sh 10s` in `make test`, longer under `make fuzz`. Targets are found, not listed,
# so a new FuzzXxx is picked up by itself. Plain `go test` already runs each target's seed corpus; this explores
# beyond it. New crashers are written to the package's testdata/fuzz/ by Go; commit them as regression seeds.
#
# Go before 1.27 has a race in its fuzz coordinator (golang/go#75804): when a duration -fuzztime runs out while a
# worker is mid-call, the target fails with a bare "context deadline exceeded" although nothing was found. It shows on
# a loaded machine. A real finding always writes its input ("Failing input written to testdata/fuzz/..."), so a
# failure that is only that deadline, with no new input written, is run again (up to FUZZ_RETRIES times); anything
# else fails at once. Drop the retry when go.mod moves to Go 1.27.
#
# FUZZ_PARALLEL sets each target's workers (go test -parallel; default one per core): .ci/run runs the targets with
# one worker beside the cluster tests.
set -euo pipefail
fuzztime="${1:-10s}"
retries="${FUZZ_RETRIES:-2}"
cd "$(dirname "$0")/.."
go="${GO:-go}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT

# is_deadline_race LOG CORPUS_BEFORE CORPUS_DIR: the failure in LOG is the coordinator's deadline race, not a finding.
is_deadline_race() {
	grep -q 'context deadline exceeded' "$1" || return 1
	! grep -qE 'Failing input written to|panic:|fuzzing process hung' "$1" || return 1
	[ "$(corpus_of "$3")" = "$2" ]
}

corpus_of() { ls -1 "$1" 2>/dev/null || true; }

status=0
while read -r file; do
	# go test runs in the Go module holding the file: this one, or a nested one such as kubernetes/.
	mod=$(dirname "$file")
	while [ "$mod" != . ] && [ ! -f "$mod/go.mod" ]; do mod=$(dirname "$mod"); done
	dir=$(dirname "$file")
	pkg="./${dir#"$mod"/}"
	[ "$mod" != "$dir" ] || pkg=.
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
		corpus="$(dirname "$file")/testdata/fuzz/$target"
		before="$(corpus_of "$corpus")"
		for attempt in $(seq 0 "$retries"); do
			echo "== $dir $target ($fuzztime)"
			if "$go" -C "$mod" test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" ${FUZZ_PARALLEL:+-parallel "$FUZZ_PARALLEL"} "$pkg" 2>&1 | tee "$log"; then
				break
			fi
			if [ "$attempt" -lt "$retries" ] && is_deadline_race "$log" "$before" "$corpus"; then
				echo "== $target: only the fuzz coordinator's deadline race (golang/go#75804), nothing found; again"
				continue
			fi
			status=1
			break
		done
	done
done < <(git ls-files --cached --others --exclude-standard '*_test.go' | xargs grep -l '^func Fuzz' | sort -u)
exit $status

#!/usr/bin/env bash
# Runs every fuzz target in the module for the given time each (default 10s).
# Usage: scripts/fuzz.sh [duration]
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-10s}
status=0
for pkg in $(go list ./...); do
	targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
	for t in $targets; do
		echo "fuzz $pkg $t ($fuzztime)"
		if ! go test -run '^$' -fuzz "^${t}\$" -fuzztime "$fuzztime" "$pkg" >/tmp/fuzz-$$.log 2>&1; then
			cat /tmp/fuzz-$$.log
			status=1
		fi
	done
done
rm -f /tmp/fuzz-$$.log
exit $status

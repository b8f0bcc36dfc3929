#!/usr/bin/env bash
# Runs the three-server, three-engine example of docs/SCALE-OUT.md on this machine (loopback):
# three `engine run` processes, each embedding one server of one NATS cluster
# (docs/examples/cluster/n1.conf..n3.conf: routes, JetStream, the partition mappings).
#
#   scripts/cluster-example.sh            single-copy mode: each engine owns a third of 64 partitions
#   scripts/cluster-example.sh replicated replicated mode: every engine consumes every partition's
#                                         R3 stream; the partitions are spread over the live
#                                         engines, and the others take over when one goes
#
# Stores go to ./cluster-example/e1..e3 (JetStream's to ./cluster-example/n1..n3), monitoring to
# http://127.0.0.1:8222..8224 (/readyz, /status). Publish with any NATS client to orders.<key> on
# nats://127.0.0.1:4222 (request/reply in single-copy mode; JetStream publish in replicated mode),
# read back with
#   go run ./cmd/engine get --nats nats://127.0.0.1:4222 --partitions 64 --topic orders --queue <partition>
# Each engine's log lines start with its name (e1: ...); its process id is in cluster-example/e<i>.pid
# (kill one to see the others take over). Ctrl-C stops all three.
#
# Environment (all optional):
#   ENGINE       the engine binary to run (default: built from ./cmd/engine into the directory)
#   DIR          the directory of the stores, configurations and pid files (default ./cluster-example)
#   PORT_OFFSET  added to every port: clients 4222..4224, routes 6222..6224, monitoring 8222..8224
#                (default 0), to run the example beside something that holds those ports
#
# On several hosts: give each host its nX.conf with the other hosts' addresses in routes, and run
# the same engine command there (scripts/cluster-host.sh).
set -euo pipefail
mode=${1:-single}
case "$mode" in
single | replicated) ;;
*)
	echo "usage: $0 [single|replicated]" >&2
	exit 2
	;;
esac
cd "$(dirname "$0")/.."
dir=${DIR:-cluster-example}
off=${PORT_OFFSET:-0}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
engine=${ENGINE:-}
if [ -z "$engine" ]; then
	go build -o "$dir/engine" ./cmd/engine
	engine=$dir/engine
fi
owned=(0-21 22-42 43-63)
# Each engine in a process group of its own (job control), so that Ctrl-C reaches this script
# alone, which then stops each engine once (a second signal makes an engine exit at once).
set -m
pids=()
printers=()
stop() {
	trap - INT TERM
	kill -TERM "${pids[@]}" 2>/dev/null || true
}
trap stop INT TERM
trap 'kill -TERM "${pids[@]}" 2>/dev/null || true' EXIT
for i in 1 2 3; do
	# The example's configuration with this run's ports and directories (the same file when
	# PORT_OFFSET is 0, but for the absolute JetStream directory).
	conf=$dir/n$i.conf
	awk -v off="$off" -v dir="$dir/" '{
		out = ""
		while (match($0, /127\.0\.0\.1:[46]22[234]/)) {
			out = out substr($0, 1, RSTART + 9) (substr($0, RSTART + 10, 4) + off)
			$0 = substr($0, RSTART + RLENGTH)
		}
		$0 = out $0
		sub(/\.\/cluster-example\//, dir)
		print
	}' "docs/examples/cluster/n$i.conf" >"$conf"
	# Each engine its own store host: offset message ids (store host + CommitLog offset) must not
	# collide between engines, and none the default (127.0.0.1:10911), which the engine warns of.
	args=(run --nats-config "$conf" --partitions 64 --topic-tokens 1
		--store "$dir/e$i" --http "127.0.0.1:$((8221 + off + i))" --store-host "127.0.0.1:$((10920 + i))")
	if [ "$mode" = replicated ]; then
		args+=(--owned-partitions 0-63 --replicated --engine-id "e$i")
	else
		args+=(--owned-partitions "${owned[$((i - 1))]}")
	fi
	# The engine's lines, its name first, by a printer that ignores the signals (it ends when the
	# engine has exited and closed its output), so that the engine's last lines are printed too.
	# bash's read takes one line at a time from a pipe, so each line is printed as it comes; mawk
	# (Debian's awk) reads its input in blocks, and held a quiet engine's lines until its exit.
	exec 3> >(trap '' INT TERM && while IFS= read -r line || [ -n "$line" ]; do printf 'e%s: %s\n' "$i" "$line"; done)
	printers+=("${!:-}")
	"$engine" "${args[@]}" >&3 2>&3 3>&- &
	pids+=($!)
	exec 3>&-
	echo "${pids[$((i - 1))]}" >"$dir/e$i.pid"
done
# Until every engine has exited (a signal interrupts wait: wait again); the exit status is the
# last failed engine's.
status=0
for pid in "${pids[@]}"; do
	while :; do
		code=0
		wait "$pid" || code=$?
		if [ "$code" -gt 128 ] && kill -0 "$pid" 2>/dev/null; then
			continue
		fi
		[ "$code" -eq 0 ] || status=$code
		break
	done
done
for p in "${printers[@]}"; do
	[ -z "$p" ] || wait "$p" 2>/dev/null || true
done
exit "$status"

#!/usr/bin/env bash
# Runs the three-server, three-engine example of docs/SCALE-OUT.md on this machine (loopback):
# three `engine run` processes, each embedding one server of one NATS cluster
# (docs/examples/cluster/n1.conf..n3.conf: routes, JetStream, the partition mappings).
#
#   scripts/cluster-example.sh            single-copy mode: each engine owns a third of 64 partitions
#   scripts/cluster-example.sh replicated replicated mode: every engine consumes every partition's
#                                         R3 stream; one is pinned per partition, the others take over
#
# Stores go to ./cluster-example/e1..e3 (JetStream's to ./cluster-example/n1..n3), monitoring to
# http://127.0.0.1:8222..8224. Publish with any NATS client to orders.<key> on nats://127.0.0.1:4222
# (request/reply in single-copy mode; JetStream publish in replicated mode), read back with
#   go run ./cmd/engine get --nats nats://127.0.0.1:4222 --topic orders --queue <partition>
# On several hosts: give each host its nX.conf with the other hosts' addresses in routes, and run
# the same engine command there.
set -euo pipefail
mode=${1:-single}
cd "$(dirname "$0")/.."
mkdir -p cluster-example
go build -o cluster-example/engine ./cmd/engine
owned=(0-21 22-42 43-63)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' INT TERM EXIT
for i in 1 2 3; do
	# Each engine its own store host: offset message ids (store host + CommitLog offset) must not
	# collide between engines.
	args=(run --nats-config "docs/examples/cluster/n$i.conf" --partitions 64 --topic-tokens 1
		--store "cluster-example/e$i" --http "127.0.0.1:$((8221 + i))" --store-host "127.0.0.1:$((10910 + i))")
	if [ "$mode" = replicated ]; then
		args+=(--owned-partitions 0-63 --replicated)
	else
		args+=(--owned-partitions "${owned[$((i - 1))]}")
	fi
	cluster-example/engine "${args[@]}" &
	pids+=($!)
done
wait

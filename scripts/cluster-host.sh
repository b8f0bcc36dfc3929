#!/usr/bin/env bash
# Runs one host of the three-host deployment of docs/SCALE-OUT.md: this host's engine, embedding
# its server of the NATS cluster. Run it on each of the three hosts, with that host's index:
#
#   scripts/cluster-host.sh 1 10.0.0.1 10.0.0.2 10.0.0.3            # on 10.0.0.1, single-copy
#   scripts/cluster-host.sh 2 10.0.0.1 10.0.0.2 10.0.0.3            # on 10.0.0.2
#   scripts/cluster-host.sh 3 10.0.0.1 10.0.0.2 10.0.0.3 replicated # (every host the same mode)
#
# It writes cluster-example/n<i>.conf from docs/examples/cluster/n<i>.conf (clients on :4222,
# routes on :6222 of every host, JetStream and the mappings unchanged) and runs the engine with its
# third of 64 partitions (every partition in replicated mode), store in cluster-example/e<i>,
# monitoring on :8222. Then measure from any machine: `engine bench` drives one engine; several
# publishers against the three hosts' :4222 give the aggregate (compare with RESULTS.md §6).
set -euo pipefail
if [ $# -lt 4 ]; then
	echo "usage: $0 <index 1-3> <host1> <host2> <host3> [single|replicated]" >&2
	exit 2
fi
i=$1
hosts=("$2" "$3" "$4")
mode=${5:-single}
cd "$(dirname "$0")/.."
mkdir -p cluster-example
go build -o cluster-example/engine ./cmd/engine
conf=cluster-example/n$i.conf
sed -e "s|^listen: 127.0.0.1:[0-9]*|listen: 0.0.0.0:4222|" \
	-e "s|^  listen: 127.0.0.1:[0-9]*|  listen: 0.0.0.0:6222|" \
	-e "s|nats-route://127.0.0.1:6222|nats-route://${hosts[0]}:6222|" \
	-e "s|nats-route://127.0.0.1:6223|nats-route://${hosts[1]}:6222|" \
	-e "s|nats-route://127.0.0.1:6224|nats-route://${hosts[2]}:6222|" \
	"docs/examples/cluster/n$i.conf" >"$conf"
owned=(0-21 22-42 43-63)
args=(run --nats-config "$conf" --partitions 64 --topic-tokens 1 --store "cluster-example/e$i" --http 0.0.0.0:8222
	--store-host "${hosts[$((i - 1))]}:10911") # offset message ids name this host
if [ "$mode" = replicated ]; then
	args+=(--owned-partitions 0-63 --replicated)
else
	args+=(--owned-partitions "${owned[$((i - 1))]}")
fi
exec cluster-example/engine "${args[@]}"

#!/usr/bin/env bash
# A local Shale cluster in one command: N masters with M replicas each on consecutive ports,
# every node's data under one directory, and the topology pushed to each node as Apache
# Kvrocks Controller pushes it (CLUSTERX SETNODEID, then CLUSTERX SETNODES).
#
#   scripts/cluster.sh start [--masters 3] [--replicas 1] [--port 7001] [--dir ./shale-cluster]
#   scripts/cluster.sh stop [--dir ./shale-cluster]
#
# Then `redis-cli -c -p 7001`, or any Redis Cluster client given one node's address. Nodes
# are started on ports port, port+1, ...: each master, followed by its replicas. Running
# `start` again on the same directory restarts the nodes on their data. Needs redis-cli
# (Debian: apt-get install redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."

action=${1:-start}
shift || true
masters=3
replicas=1
port=7001
dir=./shale-cluster
while [ $# -gt 0 ]; do
    case "$1" in
        --masters) masters=$2; shift 2 ;;
        --replicas) replicas=$2; shift 2 ;;
        --port) port=$2; shift 2 ;;
        --dir) dir=$2; shift 2 ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
done

if [ "$action" = stop ]; then
    for pidfile in "$dir"/*/shale.pid; do
        [ -e "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
        rm -f "$pidfile"
    done
    exit 0
fi
if [ "$action" != start ]; then
    echo "usage: $0 start|stop [options]" >&2
    exit 2
fi
if ! command -v redis-cli >/dev/null; then
    echo "redis-cli is needed to push the topology: apt-get install redis-tools" >&2
    exit 1
fi

source scripts/setup.sh
cargo build --release --bin shale-server
server="$CARGO_TARGET_DIR/release/shale-server"

# A node's ID: 40 characters, as the controller's are, derived from its port.
node_id() { printf 'shale%035d' "$1"; }

# The topology: the slots split evenly among the masters, each replica after its master.
topology=""
per_shard=$((replicas + 1))
for ((m = 0; m < masters; m++)); do
    first=$((m * 16384 / masters))
    last=$(((m + 1) * 16384 / masters - 1))
    master_port=$((port + m * per_shard))
    topology+="$(node_id "$master_port") 127.0.0.1 $master_port master - $first-$last"$'\n'
    for ((r = 1; r <= replicas; r++)); do
        replica_port=$((master_port + r))
        topology+="$(node_id "$replica_port") 127.0.0.1 $replica_port slave $(node_id "$master_port")"$'\n'
    done
done

nodes=$((masters * per_shard))
for ((i = 0; i < nodes; i++)); do
    p=$((port + i))
    mkdir -p "$dir/$p"
    "$server" --port "$p" --dir "$dir/$p/data" --cluster-enabled yes >"$dir/$p/shale.log" 2>&1 &
    echo $! >"$dir/$p/shale.pid"
done
for ((i = 0; i < nodes; i++)); do
    p=$((port + i))
    for _ in $(seq 100); do
        redis-cli -p "$p" PING >/dev/null 2>&1 && break
        sleep 0.1
    done
    reply=$(redis-cli -p "$p" CLUSTERX SETNODEID "$(node_id "$p")")
    # FORCE: a restart on the same directories takes this script's topology again.
    [ "$reply" = OK ] && reply=$(redis-cli -p "$p" CLUSTERX SETNODES "$topology" 1 FORCE)
    if [ "$reply" != OK ]; then
        echo "node on port $p: $reply (see $dir/$p/shale.log)" >&2
        exit 1
    fi
done
echo "cluster of $masters masters with $replicas replicas each on ports $port-$((port + nodes - 1)); logs in $dir/<port>/shale.log"
echo "try: redis-cli -c -p $port"

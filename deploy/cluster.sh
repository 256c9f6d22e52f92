#!/usr/bin/env bash
# make cluster: the topology of deploy/compose.yaml as local processes, for
# trying several replicas without Docker: one Redis (append-only file on)
# and three kerneld replicas on loopback. Ctrl-C stops them all.
#
# make cluster STORE=postgres: the three replicas share the local
# PostgreSQL instead (deploy/compose.postgres.yaml's topology), in the
# database CLUSTER_POSTGRES_URL names (default
# postgres://postgres@127.0.0.1:5432/kerneld_cluster), created if missing.
#
#   CLUSTER_REDIS_PORT (6390) and CLUSTER_PORTS ("8081 8082 8083") move them.
#   Logs, and Redis' files, are in deploy/cluster/.
set -euo pipefail
cd "$(dirname "$0")/.."

store=${STORE:-redis}
redis_port=${CLUSTER_REDIS_PORT:-6390}
postgres_url=${CLUSTER_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/kerneld_cluster}
ports=${CLUSTER_PORTS:-8081 8082 8083}
dir=deploy/cluster
mkdir -p "$dir"

case $store in
redis)
	if ! command -v redis-server >/dev/null; then
		echo "make cluster needs redis-server (Debian: apt-get install redis-server)" >&2
		exit 1
	fi
	;;
postgres)
	if ! command -v psql >/dev/null; then
		echo "make cluster STORE=postgres needs psql and a PostgreSQL (Debian: apt-get install postgresql)" >&2
		exit 1
	fi
	;;
*)
	echo "STORE=$store: make cluster runs on redis or postgres" >&2
	exit 1
	;;
esac
[ -x bin/kerneld ] || { echo "bin/kerneld is missing: run make build" >&2; exit 1; }

pids=()
stop() {
	trap - INT TERM EXIT
	[ ${#pids[@]} -eq 0 ] || kill -TERM "${pids[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
}
trap stop INT TERM EXIT

if [ "$store" = redis ]; then
	redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$dir" --appendonly yes --save '' \
		--logfile redis.log &
	pids+=($!)
	for _ in $(seq 50); do
		redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
		sleep 0.1
	done
	redis-cli -p "$redis_port" ping >/dev/null || { echo "redis-server did not start; see $dir/redis.log" >&2; exit 1; }
	store_flags=(--store redis --redis-url "redis://127.0.0.1:$redis_port/0")
	where="Redis on 127.0.0.1:$redis_port"
else
	# Connect to the server's own database to create the cluster's.
	db=${postgres_url##*/}
	db=${db%%\?*}
	admin_url=${postgres_url%/*}/postgres
	if [ "$(psql "$admin_url" -Atc "SELECT 1 FROM pg_database WHERE datname = '$db'")" != 1 ]; then
		psql "$admin_url" -qc "CREATE DATABASE \"$db\"" || { echo "cannot create database $db" >&2; exit 1; }
	fi
	store_flags=(--store postgres --postgres-url "$postgres_url")
	where="PostgreSQL database $db"
fi

i=0
replicas=()
for port in $ports; do
	i=$((i + 1))
	bin/kerneld -config configs/kerneld.yaml "${store_flags[@]}" \
		--addr "127.0.0.1:$port" --replica "replica-$i" >"$dir/replica-$i.log" 2>&1 &
	pids+=($!)
	replicas+=("http://127.0.0.1:$port (pid $!)")
done
for port in $ports; do
	for _ in $(seq 100); do
		curl -fs "127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
		sleep 0.1
	done
	curl -fs "127.0.0.1:$port/readyz" >/dev/null || { echo "the replica on port $port did not start; see $dir/" >&2; exit 1; }
done

echo "$where; kerneld replicas on:"
for r in "${replicas[@]}"; do echo "  $r"; done
echo "Any replica serves any session. Kill one (kill -9 PID) and the others continue its runs."
echo "Logs in $dir/. Ctrl-C stops the cluster."
# A replica that exits leaves the others running: they take its sessions
# over, which is what a cluster is for. Redis exiting stops them all; on
# Postgres the cluster runs until Ctrl-C.
if [ "$store" = redis ]; then
	wait "${pids[0]}" || true
	echo "redis-server exited; stopping the replicas" >&2
else
	wait || true
fi

#!/usr/bin/env bash
# cluster-bench.sh: produce throughput of a 1-node and a 3-node Nereus cluster
# on the same machine, both on versitygw (S3) and a real etcd process, with
# `nereus bench` (franz-go producers, acks=all) against the Kafka listeners.
# Reported, not asserted. Usage: scripts/cluster-bench.sh [bench flags...]
# (default: --producers 3 --partitions 12 --consumers 0 --duration 20s).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/install-tools.sh" versitygw etcd >/dev/null
work="$(mktemp -d /tmp/nereus-cluster-bench-XXXXXX)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()'; }
(cd "$root" && go build -o "$work/nereus" ./cmd/nereus)
flags=("$@")
[[ ${#flags[@]} -eq 0 ]] && flags=(--producers 3 --partitions 12 --consumers 0 --duration 20s)

run() { # run N: start versitygw + etcd + N nodes, bench, stop everything
	local n=$1 d="$work/run-$1"
	mkdir -p "$d/s3"
	local s3p etcdp peerp
	s3p=$(free_port); etcdp=$(free_port); peerp=$(free_port)
	ROOT_ACCESS_KEY=nereus ROOT_SECRET_KEY=nereus-secret "$root/.cache/bin/versitygw" --port "127.0.0.1:$s3p" posix "$d/s3" >"$d/s3.log" 2>&1 &
	pids+=($!)
	"$root/.cache/bin/etcd" --data-dir "$d/etcd" --listen-client-urls "http://127.0.0.1:$etcdp" \
		--advertise-client-urls "http://127.0.0.1:$etcdp" --listen-peer-urls "http://127.0.0.1:$peerp" \
		--initial-advertise-peer-urls "http://127.0.0.1:$peerp" --initial-cluster "default=http://127.0.0.1:$peerp" >"$d/etcd.log" 2>&1 &
	pids+=($!)
	sleep 2
	curl -sf --aws-sigv4 aws:amz:us-east-1:s3 --user nereus:nereus-secret -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
		-X PUT "http://127.0.0.1:$s3p/bench" >/dev/null
	local first=""
	for i in $(seq 1 "$n"); do
		local hp kp pp
		hp=$(free_port); kp=$(free_port); pp=$(free_port)
		NEREUS_OBJECT_STORE=s3://bench/c NEREUS_S3_ENDPOINT="http://127.0.0.1:$s3p" NEREUS_S3_PATH_STYLE=true \
			NEREUS_S3_ACCESS_KEY=nereus NEREUS_S3_SECRET_KEY=nereus-secret NEREUS_METADATA="etcd://127.0.0.1:$etcdp/bench/" \
			"$work/nereus" serve --data-dir "$d/node-$i" --http-addr "127.0.0.1:$hp" --kafka-addr "127.0.0.1:$kp" \
			--pulsar-addr "127.0.0.1:$pp" >"$d/node-$i.log" 2>&1 &
		pids+=($!)
		[[ -z "$first" ]] && first="http://127.0.0.1:$hp"
	done
	for _ in $(seq 1 100); do curl -sf "$first/healthz" >/dev/null && break; sleep 0.2; done
	sleep 3
	echo "== $n node(s)"
	"$work/nereus" bench --server "$first" --label "nereus-${n}-node" "${flags[@]}"
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	pids=()
}
run 1
run 3

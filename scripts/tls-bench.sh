#!/usr/bin/env bash
# scripts/tls-bench.sh — Kafka produce throughput over TLS vs plaintext on
# one nereus serve (durable defaults: file object store, bolt metadata),
# alternating rounds so machine noise hits both alike; prints each round,
# the medians and the TLS/plaintext ratio.
#
#   ROUNDS=3 DURATION=20s scripts/tls-bench.sh
#
# Env: ROUNDS (3), DURATION (20s), WARMUP (5s), PARTITIONS (16),
# RECORD_SIZE (1024), SASL=1 adds SASL_SSL/SCRAM-SHA-512 rounds.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-20s} WARMUP=${WARMUP:-5s}
PARTITIONS=${PARTITIONS:-16} RECORD_SIZE=${RECORD_SIZE:-1024}
work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
(cd "$ROOT" && go build -o "$work/nereus" ./cmd/nereus && go build -o "$work/nereus-bench" ./cmd/nereus-bench)
bash "$ROOT/scripts/gen-dev-certs.sh" "$work/certs" >/dev/null
free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http=$(free) plain=$(free) ssl=$(free) sasl=$(free)
"$work/nereus" serve --data-dir "$work/data" --http-addr "127.0.0.1:$http" --pulsar-addr "" \
	--kafka-listeners "PLAINTEXT://127.0.0.1:$plain,SSL://127.0.0.1:$ssl,SASL_SSL://127.0.0.1:$sasl" \
	--tls-cert-file "$work/certs/server.pem" --tls-key-file "$work/certs/server-key.pem" \
	--log-level warn >"$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -fs "127.0.0.1:$http/healthz" >/dev/null && break; sleep 0.1; done
modes=(plain tls)
if [ "${SASL:-0}" = 1 ]; then
	echo bench-secret | "$work/nereus" kafka user set bench --server "http://127.0.0.1:$http" >/dev/null
	printf 'bench-secret' >"$work/pw"
	modes+=(sasl_ssl)
fi
declare -A results
for r in $(seq "$ROUNDS"); do
	for m in "${modes[@]}"; do
		case $m in
		plain) args=(--bootstrap "127.0.0.1:$plain") ;;
		tls) args=(--bootstrap "127.0.0.1:$ssl" --tls-ca-file "$work/certs/ca.pem") ;;
		sasl_ssl) args=(--bootstrap "127.0.0.1:$sasl" --tls-ca-file "$work/certs/ca.pem" --sasl-mechanism SCRAM-SHA-512 --sasl-user bench --sasl-password-file "$work/pw") ;;
		esac
		mbps=$("$work/nereus-bench" "${args[@]}" --label "$m" --consumers 0 --duration "$DURATION" --warmup "$WARMUP" \
			--partitions "$PARTITIONS" --record-size "$RECORD_SIZE" --json | sed -n 's/^RESULT //p' |
			python3 -c 'import sys,json; print("%.1f" % json.load(sys.stdin)["ProduceMBps"])')
		echo "round $r $m: $mbps MB/s"
		results[$m]="${results[$m]:-} $mbps"
	done
done
median() { printf '%s\n' $1 | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
p=$(median "${results[plain]}")
for m in "${modes[@]}"; do
	med=$(median "${results[$m]}")
	echo "median $m: $med MB/s ($(awk -v a="$med" -v b="$p" 'BEGIN {printf "%.0f%%", 100*a/b}') of plaintext)"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"

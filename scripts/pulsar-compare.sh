#!/usr/bin/env bash
# pulsar-compare.sh measures Nereus against Apache Pulsar on the same
# machine, in the same run: bench/pulsarbench (pulsar-client-go; one topic,
# one Shared subscription, 1 KiB batched messages) against
#
#   pulsar  Apache Pulsar 4.0.7 standalone (org.apache.pulsar:pulsar-broker
#           from Maven Central, `PulsarStandaloneStarter -c FILE -nfw -nss`,
#           its own local bookie and RocksDB metadata store, defaults except
#           ensemble/quorums 1 and the index interceptor KoP uses)
#   nereus  a default `nereus serve` built from this checkout (profile
#           OBJECT_WAL_ASYNC_OBJECT, filesystem object store, embedded
#           metadata store), fresh data dir
#
# alternating round by round so a slow moment of the shared machine hits
# both. It prints each round's publish and consume rate and publish
# latency, and the medians. The standalone's bookie keeps BookKeeper's
# default journalSyncData=true: it fsyncs its journal before acknowledging,
# as Nereus acknowledges only durable data. RATE=10000 measures publish
# latency at a fixed rate (the issue's check) instead of the maximum rate.
# (To run the pulsar tests against Apache Pulsar, start the standalone the
# same way and set NEREUS_PULSAR_URL / NEREUS_PULSAR_HTTP_URL.)
#
# Usage: scripts/pulsar-compare.sh    (about 3 minutes)
# Environment (defaults): ROUNDS=3 DURATION=20s WARMUP=5s SIZE=1024 RATE=0 (unthrottled)
#   NEREUS_ARGS= (extra `nereus serve` flags)
#   PULSAR_PORT=16660 PULSAR_HTTP=18090 BOOKIE_PORT=13181 NEREUS_PORT=16652
#   NEREUS_HTTP=18482 CACHE=$HOME/.cache/nereus
set -euo pipefail
ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-20s} WARMUP=${WARMUP:-5s} SIZE=${SIZE:-1024} RATE=${RATE:-0}
NEREUS_ARGS=${NEREUS_ARGS:-}
PULSAR_PORT=${PULSAR_PORT:-16660} PULSAR_HTTP=${PULSAR_HTTP:-18090} BOOKIE_PORT=${BOOKIE_PORT:-13181}
NEREUS_PORT=${NEREUS_PORT:-16652} NEREUS_HTTP=${NEREUS_HTTP:-18482}
CACHE=${CACHE:-$HOME/.cache/nereus}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
dist=$CACHE/pulsar-standalone-4.0.7
mkdir -p "$dist"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	# Wait for them (the standalone writes its data dir until it exits).
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

if [ ! -s "$dist/classpath.txt" ]; then
	cat > "$dist/pom.xml" <<'POM'
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>nereus</groupId><artifactId>pulsar-standalone-ref</artifactId><version>1</version>
<dependencies><dependency><groupId>org.apache.pulsar</groupId><artifactId>pulsar-broker</artifactId>
<version>4.0.7</version></dependency></dependencies></project>
POM
	echo "resolving pulsar-broker 4.0.7 from Maven Central (once, into ~/.m2)..."
	(cd "$dist" && mvn -q dependency:build-classpath -Dmdep.outputFile=classpath.txt)
fi
cat > "$work/standalone.conf" <<EOF2
clusterName=standalone
bindAddress=127.0.0.1
advertisedAddress=127.0.0.1
brokerServicePort=$PULSAR_PORT
webServicePort=$PULSAR_HTTP
managedLedgerDefaultEnsembleSize=1
managedLedgerDefaultWriteQuorum=1
managedLedgerDefaultAckQuorum=1
allowAutoTopicCreationType=non-partitioned
brokerEntryMetadataInterceptors=org.apache.pulsar.common.intercept.AppendIndexMetadataInterceptor
acknowledgmentAtBatchIndexLevelEnabled=true
loadBalancerEnabled=false
functionsWorkerEnabled=false
EOF2
mkdir -p "$work/pulsar"
(cd "$work/pulsar" && exec java -Xmx1g -cp "$(cat "$dist/classpath.txt")" org.apache.pulsar.PulsarStandaloneStarter \
	-c "$work/standalone.conf" -nfw -nss --bookkeeper-port "$BOOKIE_PORT" --bookkeeper-dir "$work/pulsar/bk" \
	--zookeeper-dir "$work/pulsar/zk" > "$work/pulsar.log" 2>&1) &
pulsar_pid=$!
pids+=("$pulsar_pid")

(cd "$root" && go build -o "$work/nereus" ./cmd/nereus && go build -o "$work/pulsarbench" ./bench/pulsarbench/cmd/pulsarbench)
"$work/nereus" serve --data-dir "$work/nereus-data" --http-addr "127.0.0.1:$NEREUS_HTTP" --kafka-addr "" \
	--pulsar-addr "127.0.0.1:$NEREUS_PORT" $NEREUS_ARGS > "$work/nereus.log" 2>&1 &
pids+=("$!")

for i in $(seq 120); do
	# The standalone creates public/default a moment after it answers.
	# The standalone creates public/default, then owns its bundle, a while
	# after it answers: wait for a topic lookup to succeed.
	curl -sf "127.0.0.1:$PULSAR_HTTP/admin/v2/namespaces/public" 2>/dev/null | grep -q public/default &&
		curl -sf -m 10 "127.0.0.1:$PULSAR_HTTP/lookup/v2/topic/persistent/public/default/warm-up" >/dev/null &&
		curl -sf "127.0.0.1:$NEREUS_HTTP/healthz" >/dev/null && break
	sleep 1
done

declare -A pub cons p50 p99
for r in $(seq "$ROUNDS"); do
	for target in pulsar nereus; do
		if [ "$target" = pulsar ]; then url=pulsar://127.0.0.1:$PULSAR_PORT admin=http://127.0.0.1:$PULSAR_HTTP
		else url=pulsar://127.0.0.1:$NEREUS_PORT admin=http://127.0.0.1:$NEREUS_HTTP; fi
		line=$("$work/pulsarbench" -url "$url" -admin "$admin" -duration "$DURATION" -warmup "$WARMUP" -batching -size "$SIZE" -rate "$RATE" | tail -1)
		echo "round $r $target (load $(cut -d' ' -f1-3 /proc/loadavg)): $line"
		pub[$target]+="$(sed -E 's/.*publish ([0-9]+) msg.*/\1/' <<<"$line") "
		cons[$target]+="$(sed -E 's/.*consume ([0-9]+) msg.*/\1/' <<<"$line") "
		p50[$target]+="$(sed -E 's/.*publish latency ms p50 ([0-9.]+) .*/\1/' <<<"$line") "
		p99[$target]+="$(sed -E 's/.*publish latency ms p50 [0-9.]+ p99 ([0-9.]+) .*/\1/' <<<"$line") "
	done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
for target in pulsar nereus; do
	p=$(median <<<"${pub[$target]}") c=$(median <<<"${cons[$target]}")
	l50=$(median <<<"${p50[$target]}") l99=$(median <<<"${p99[$target]}")
	echo "median $target: publish $p msg/s, consume $c msg/s (consume/publish $(awk "BEGIN {printf \"%.2f\", $c/$p}")); publish latency p50 $l50 ms, p99 $l99 ms"
done

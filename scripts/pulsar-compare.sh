#!/usr/bin/env bash
# pulsar-compare.sh measures Nereus against Apache Pulsar on the same
# machine, in the same run: bench/pulsarbench (pulsar-client-go; one topic,
# one Shared subscription, 1 KiB batched messages, a fixed publish rate)
# against
#
#   pulsar  Apache Pulsar 4.0.7 standalone (org.apache.pulsar:pulsar-broker
#           from Maven Central, `PulsarStandaloneStarter -c FILE -nfw -nss`,
#           its own local bookie and RocksDB metadata store, loopback only,
#           defaults except ensemble/quorums 1 and the index interceptor KoP
#           uses; the bookie journal is written and fdatasync'ed before an
#           add is acknowledged: journalWriteData/journalSyncData=true, the
#           BookKeeper defaults, set explicitly because the standalone's
#           bookie takes its settings from this same file)
#   nereus  a default `nereus serve` built from this checkout (profile
#           OBJECT_WAL_ASYNC_OBJECT, filesystem object store, embedded
#           metadata store), fresh data dir
#
# alternating round by round (pulsar, nereus, pulsar, nereus, ...) so a slow
# moment of the shared machine hits both. Each round prints pulsarbench's
# line and the load average; the end prints each target's medians of publish
# p50/p99 and end-to-end p50 and the ratio nereus/pulsar of the publish p50
# (issue 15's target: <= 1.00 at 10,000 msg/s).
# (To run the pulsar tests against Apache Pulsar, start the standalone the
# same way and set NEREUS_PULSAR_URL / NEREUS_PULSAR_HTTP_URL.)
#
# Usage: scripts/pulsar-compare.sh    (about 2.5 minutes with the defaults,
#   plus a one-time Maven resolution of pulsar-broker into ~/.m2)
# Environment (defaults): ROUNDS=3 RATE=10000 DURATION=15s WARMUP=3s SIZE=1024
#   PULSAR_PORT=16660 PULSAR_HTTP=18090 BOOKIE_PORT=13181 NEREUS_PORT=16652
#   NEREUS_HTTP=18482 CACHE=$HOME/.cache/nereus (outside the clone: the
#   resolved classpath is kept there)
#   RATE=0 measures throughput instead (as fast as the producer can go).
#   NEREUS_ARGS= (extra `nereus serve` flags, e.g. to A/B a setting)
#   BASE_DIR= (a second checkout, e.g. /work/main: its `nereus serve` runs
#   too, as target nereus-base on NEREUS_BASE_PORT=16653 / NEREUS_BASE_HTTP=
#   18483, alternated in the same rounds: an A/B of two builds on the same
#   load, with its own median and ratio)
#   Before round 1 each target gets one unmeasured 5 s run (the JVM's JIT
#   and both servers' first topic), so round 1 is not a cold start.
set -euo pipefail
ROUNDS=${ROUNDS:-3} RATE=${RATE:-10000} DURATION=${DURATION:-15s} WARMUP=${WARMUP:-3s} SIZE=${SIZE:-1024}
NEREUS_ARGS=${NEREUS_ARGS:-}
PULSAR_PORT=${PULSAR_PORT:-16660} PULSAR_HTTP=${PULSAR_HTTP:-18090} BOOKIE_PORT=${BOOKIE_PORT:-13181}
NEREUS_PORT=${NEREUS_PORT:-16652} NEREUS_HTTP=${NEREUS_HTTP:-18482}
BASE_DIR=${BASE_DIR:-} NEREUS_BASE_PORT=${NEREUS_BASE_PORT:-16653} NEREUS_BASE_HTTP=${NEREUS_BASE_HTTP:-18483}
targets="pulsar nereus"
[ -n "$BASE_DIR" ] && targets="pulsar nereus-base nereus"
CACHE=${CACHE:-$HOME/.cache/nereus}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
dist=$CACHE/pulsar-standalone-4.0.7
mkdir -p "$dist"
pids=()
cleanup() {
	# Stop what we started, by pid, and wait (bounded) for it to exit
	# before deleting its data directory under it.
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do
		for _ in $(seq 60); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
		kill -9 "$p" 2>/dev/null || true
	done
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
	(cd "$dist" && mvn -q dependency:build-classpath -Dmdep.outputFile=classpath.txt.new && mv classpath.txt.new classpath.txt)
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
journalWriteData=true
journalSyncData=true
EOF2
mkdir -p "$work/pulsar"
(cd "$work/pulsar" && exec java -Xmx1g -cp "$(cat "$dist/classpath.txt")" org.apache.pulsar.PulsarStandaloneStarter \
	-c "$work/standalone.conf" -nfw -nss --bookkeeper-port "$BOOKIE_PORT" --bookkeeper-dir "$work/pulsar/bk" \
	--zookeeper-dir "$work/pulsar/zk" > "$work/pulsar.log" 2>&1) &
pids+=("$!")

(cd "$root" && go build -o "$work/nereus" ./cmd/nereus && go build -o "$work/pulsarbench" ./bench/pulsarbench/cmd/pulsarbench)
"$work/nereus" serve --data-dir "$work/nereus-data" --http-addr "127.0.0.1:$NEREUS_HTTP" --kafka-addr "" \
	--pulsar-addr "127.0.0.1:$NEREUS_PORT" $NEREUS_ARGS > "$work/nereus.log" 2>&1 &
pids+=("$!")
if [ -n "$BASE_DIR" ]; then
	(cd "$BASE_DIR" && go build -o "$work/nereus-base" ./cmd/nereus)
	"$work/nereus-base" serve --data-dir "$work/nereus-base-data" --http-addr "127.0.0.1:$NEREUS_BASE_HTTP" --kafka-addr "" \
		--pulsar-addr "127.0.0.1:$NEREUS_BASE_PORT" $NEREUS_ARGS > "$work/nereus-base.log" 2>&1 &
	pids+=("$!")
fi

ready=
for _ in $(seq 120); do
	# The standalone creates public/default, then owns its bundle, a while
	# after it answers: wait for a topic lookup to succeed.
	curl -sf "127.0.0.1:$PULSAR_HTTP/admin/v2/namespaces/public" 2>/dev/null | grep -q public/default &&
		curl -sf -m 10 "127.0.0.1:$PULSAR_HTTP/lookup/v2/topic/persistent/public/default/warm-up" >/dev/null &&
		curl -sf "127.0.0.1:$NEREUS_HTTP/healthz" >/dev/null &&
		{ [ -z "$BASE_DIR" ] || curl -sf "127.0.0.1:$NEREUS_BASE_HTTP/healthz" >/dev/null; } && ready=1 && break
	sleep 1
done
if [ -z "$ready" ]; then
	echo "pulsar-compare: servers not ready after 120 s; last lines of their logs:" >&2
	tail -5 "$work/pulsar.log" "$work/nereus.log" >&2
	exit 1
fi
# The bookie prints its effective configuration: show that the journal is
# synced, so a figure is never taken against an unsynced journal.
echo "pulsar bookie: $(grep -o '"journalSyncData" : "[a-z]*"' "$work/pulsar.log" | head -1)"

target_urls() {
	case $1 in
	pulsar) url=pulsar://127.0.0.1:$PULSAR_PORT admin=http://127.0.0.1:$PULSAR_HTTP ;;
	nereus-base) url=pulsar://127.0.0.1:$NEREUS_BASE_PORT admin=http://127.0.0.1:$NEREUS_BASE_HTTP ;;
	*) url=pulsar://127.0.0.1:$NEREUS_PORT admin=http://127.0.0.1:$NEREUS_HTTP ;;
	esac
}
for target in $targets; do
	target_urls "$target"
	"$work/pulsarbench" -url "$url" -admin "$admin" -rate "$RATE" -duration 5s -warmup 1s -batching -size "$SIZE" >/dev/null
done
field() { sed -E "s/.*$1 ([0-9.]+).*/\1/"; }
declare -A pub50 pub99 e2e50
for r in $(seq "$ROUNDS"); do
	for target in $targets; do
		target_urls "$target"
		line=$("$work/pulsarbench" -url "$url" -admin "$admin" -rate "$RATE" -duration "$DURATION" -warmup "$WARMUP" \
			-batching -size "$SIZE" | tail -1)
		echo "round $r $target (load $(cut -d' ' -f1-3 /proc/loadavg)): $line"
		pub50[$target]+="$(field 'publish latency ms p50' <<<"$line") "
		pub99[$target]+="$(sed -E 's/.*publish latency ms p50 [0-9.]+ p99 ([0-9.]+).*/\1/' <<<"$line") "
		e2e50[$target]+="$(field 'end-to-end ms p50' <<<"$line") "
	done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
for target in $targets; do
	echo "median $target: publish p50 $(median <<<"${pub50[$target]}") ms p99 $(median <<<"${pub99[$target]}") ms, end-to-end p50 $(median <<<"${e2e50[$target]}") ms"
done
p=$(median <<<"${pub50[pulsar]}") n=$(median <<<"${pub50[nereus]}")
echo "publish p50 nereus/pulsar: $(awk "BEGIN {printf \"%.2f\", $n/$p}") (target <= 1.00 at $RATE msg/s; load $(cut -d' ' -f1-3 /proc/loadavg))"
if [ -n "$BASE_DIR" ]; then
	b=$(median <<<"${pub50[nereus-base]}")
	echo "publish p50 nereus-base/pulsar: $(awk "BEGIN {printf \"%.2f\", $b/$p}"), nereus/nereus-base: $(awk "BEGIN {printf \"%.2f\", $n/$b}") (base $BASE_DIR at $(git -C "$BASE_DIR" rev-parse --short HEAD))"
fi

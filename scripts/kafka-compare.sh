#!/usr/bin/env bash
# kafka-compare.sh runs the same Kafka load (cmd/nereus-bench, OpenMessaging-
# Benchmark style) against Apache Kafka 4.x (single-node KRaft broker on
# loopback, jars from Maven Central cached in .cache/) and against Nereus,
# and prints the ratios the Kafka front end is judged by:
#
#   1. produce throughput at max rate (default 1 KiB records, 16 partitions,
#      acks=all): Nereus / Kafka, target >= 1.0;
#   2. produce and end-to-end p99 at half of Kafka's max rate: Nereus must be
#      no worse than Kafka.
#
# Nereus is the server at NEREUS_KAFKA_ADDR if set (a real `nereus serve`);
# otherwise nereus-bench starts the front end in-process over the in-memory
# stream storage, which only validates the harness and measures the protocol
# front end: that run is labelled "inprocess-streammem" and its figures say
# nothing about durable storage.
#
# Environment (defaults): DURATION=30s WARMUP=10s PARTITIONS=16 RECORD_SIZE=1024
# PRODUCERS=1 CONSUMERS=1 ACKS=all KAFKA_VERSION=4.1.1 KAFKA_HEAP=1G
# KAFKA_FSYNC=0 (1: log.flush.interval.messages=1, Kafka fsyncs every append
# like Nereus acknowledges only durable data) NEREUS_KAFKA_ADDR=
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="$root/.cache"
DURATION=${DURATION:-30s}
WARMUP=${WARMUP:-10s}
PARTITIONS=${PARTITIONS:-16}
RECORD_SIZE=${RECORD_SIZE:-1024}
PRODUCERS=${PRODUCERS:-1}
CONSUMERS=${CONSUMERS:-1}
ACKS=${ACKS:-all}
KAFKA_VERSION=${KAFKA_VERSION:-4.1.1}
KAFKA_HEAP=${KAFKA_HEAP:-1G}
KAFKA_FSYNC=${KAFKA_FSYNC:-0}

for tool in java mvn go python3; do
	command -v "$tool" >/dev/null || { echo "kafka-compare: $tool is required" >&2; exit 2; }
done

mkdir -p "$cache/bin"
echo "kafka-compare: building nereus-bench"
(cd "$root" && go build -o "$cache/bin/nereus-bench" ./cmd/nereus-bench)

libs="$cache/kafka-$KAFKA_VERSION/libs"
if [[ ! -f "$libs/kafka_2.13-$KAFKA_VERSION.jar" ]]; then
	echo "kafka-compare: resolving org.apache.kafka:kafka_2.13:$KAFKA_VERSION from Maven Central into $libs"
	mvn -q -B -Dmaven.repo.local="$cache/m2" -Dkafka.version="$KAFKA_VERSION" \
		-f "$root/scripts/kafka-dist/pom.xml" dependency:copy-dependencies \
		-DoutputDirectory="$libs" -DincludeScope=runtime
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/kafka-compare.XXXXXX")"
kafka_pid=""
cleanup() {
	if [[ -n "$kafka_pid" ]] && kill -0 "$kafka_pid" 2>/dev/null; then
		kill "$kafka_pid" 2>/dev/null || true
		for _ in $(seq 1 50); do kill -0 "$kafka_pid" 2>/dev/null || break; sleep 0.2; done
		kill -9 "$kafka_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

read -r port cport < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])
for s in ss: s.close()')

cat >"$work/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$work/data
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
num.partitions=1
PROPS
if [[ "$KAFKA_FSYNC" == "1" ]]; then
	echo "log.flush.interval.messages=1" >>"$work/server.properties"
fi
cat >"$work/log4j2.yaml" <<'LOG'
Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        Pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
LOG

cp="$libs/*"
jopts=(-cp "$cp" "-Dlog4j2.configurationFile=$work/log4j2.yaml")
cluster_id="$(java "${jopts[@]}" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)"
java "${jopts[@]}" kafka.tools.StorageTool format --standalone -t "$cluster_id" -c "$work/server.properties" >"$work/format.log" 2>&1
echo "kafka-compare: starting Apache Kafka $KAFKA_VERSION (KRaft, single node) on 127.0.0.1:$port"
java "-Xmx$KAFKA_HEAP" "-Xms$KAFKA_HEAP" "${jopts[@]}" kafka.Kafka "$work/server.properties" >"$work/kafka.log" 2>&1 &
kafka_pid=$!
for i in $(seq 1 120); do
	if (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
	if ! kill -0 "$kafka_pid" 2>/dev/null; then cat "$work/kafka.log" >&2; echo "kafka-compare: Kafka exited" >&2; exit 1; fi
	sleep 0.5
done

bench() { # bench LABEL BOOTSTRAP RATE -> prints report, writes RESULT json to $work/LABEL.json
	local label="$1" bootstrap="$2" rate="$3"
	local args=(-label "$label" -partitions "$PARTITIONS" -record-size "$RECORD_SIZE" -producers "$PRODUCERS"
		-consumers "$CONSUMERS" -acks "$ACKS" -duration "$DURATION" -warmup "$WARMUP" -rate "$rate" -json)
	if [[ -n "$bootstrap" ]]; then args+=(-bootstrap "$bootstrap"); fi
	"$cache/bin/nereus-bench" "${args[@]}" | tee "$work/$label.out"
	grep '^RESULT ' "$work/$label.out" | sed 's/^RESULT //' >"$work/$label.json"
}

nereus_addr="${NEREUS_KAFKA_ADDR:-}"
nereus_label="nereus"
if [[ -z "$nereus_addr" ]]; then nereus_label="nereus-inprocess-streammem"; fi

echo
echo "### phase 1: max rate"
bench "kafka-$KAFKA_VERSION" "127.0.0.1:$port" 0
bench "$nereus_label" "$nereus_addr" 0
half=$(python3 -c "import json; print(round(json.load(open('$work/kafka-$KAFKA_VERSION.json'))['ProduceRate']/2))")
echo
echo "### phase 2: fixed rate $half rec/s (half of Kafka's max)"
bench "kafka-$KAFKA_VERSION-half" "127.0.0.1:$port" "$half"
bench "$nereus_label-half" "$nereus_addr" "$half"

python3 - "$work" "$KAFKA_VERSION" "$nereus_label" "$KAFKA_FSYNC" <<'PY'
import json, sys
work, kv, nl, fsync = sys.argv[1:]
r = lambda n: json.load(open(f"{work}/{n}.json"))
k, n, kh, nh = r(f"kafka-{kv}"), r(nl), r(f"kafka-{kv}-half"), r(f"{nl}-half")
print()
print(f"### summary (Kafka fsync per append: {'yes' if fsync == '1' else 'no, Kafka defaults'}; shared loaded machine)")
print(f"max-rate produce throughput: kafka {k['ProduceMBps']:.2f} MB/s, {nl} {n['ProduceMBps']:.2f} MB/s, ratio {n['ProduceMBps']/k['ProduceMBps']:.2f}x (target >= 1.0)")
print(f"half-rate produce p99: kafka {kh['ProduceLatency']['P99']:.2f} ms, {nl} {nh['ProduceLatency']['P99']:.2f} ms")
print(f"half-rate end-to-end p99: kafka {kh['EndToEnd']['P99']:.2f} ms, {nl} {nh['EndToEnd']['P99']:.2f} ms")
ok_tp = n['ProduceMBps'] >= k['ProduceMBps']
ok_lat = nh['ProduceLatency']['P99'] <= kh['ProduceLatency']['P99']
print(f"throughput target met: {ok_tp}; p99 target met: {ok_lat}")
if nl.endswith("streammem"):
    print("NOTE: Nereus ran in-process over in-memory storage: these figures validate the harness only.")
PY

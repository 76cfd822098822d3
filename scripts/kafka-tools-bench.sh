#!/usr/bin/env bash
# kafka-tools-bench.sh measures Nereus with Apache Kafka's own benchmark tools
# and compares it, in the same run, with Apache Kafka itself:
#
#   * ProducerPerformance (org.apache.kafka.tools, kafka-tools jar): one Java
#     producer, PARTITIONS partitions, RECORD_SIZE-byte records, acks=all, no
#     throttle -> MB/s;
#   * EndToEndLatency (same jar): one record at a time, acks=all, produce ->
#     consume round trip -> p50 / p99 / p99.9 in ms (the tool prints whole ms).
#
# Three targets, alternating round by round so a slow moment of the shared
# machine hits all of them:
#   kafka        Apache Kafka $KAFKA_VERSION, single-node KRaft broker, defaults
#                (the broker acknowledges before fsync; the page cache holds it)
#   kafka-fsync  the same broker, topics created with flush.messages=1 (Kafka
#                fsyncs every append before acknowledging, as Nereus only
#                acknowledges durable data) -- the same as the broker setting
#                log.flush.interval.messages=1, but one broker serves both
#   nereus       a default `nereus serve` built from this checkout (default
#                profile OBJECT_WAL_ASYNC_OBJECT on the filesystem object store
#                and the embedded metadata store), fresh data dir
#
# Every jar comes from Maven Central (scripts/kafka-dist/pom.xml: kafka_2.13 +
# kafka-tools) through the local Maven repository (~/.m2, or MAVEN_REPO) and is
# copied to $CACHE/kafka-$KAFKA_VERSION/libs, outside the clone. Nothing is
# downloaded a second time.
#
# Usage: scripts/kafka-tools-bench.sh          (about 5 minutes on 2 cores)
# Environment (defaults): ROUNDS=3 PARTITIONS=16 RECORD_SIZE=1024
#   PERF_RECORDS=300000 E2E_MESSAGES=2000 KAFKA_VERSION=4.1.1 KAFKA_HEAP=1G
#   TARGETS="kafka kafka-fsync nereus" CACHE=~/.cache/nereus MAVEN_REPO=(mvn's)
#   NEREUS_ARGS= (extra `nereus serve` flags, e.g. "--object-wal-flush-interval 1ms")
#   KEEP=0 (1: keep the work dir with logs and raw tool output)
# Prints per-round figures, the median per target and the ratios
# nereus / kafka and nereus / kafka-fsync.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS=${ROUNDS:-3}
PARTITIONS=${PARTITIONS:-16}
RECORD_SIZE=${RECORD_SIZE:-1024}
PERF_RECORDS=${PERF_RECORDS:-300000}
E2E_MESSAGES=${E2E_MESSAGES:-2000}
KAFKA_VERSION=${KAFKA_VERSION:-4.1.1}
KAFKA_HEAP=${KAFKA_HEAP:-1G}
TARGETS=${TARGETS:-kafka kafka-fsync nereus}
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nereus}
NEREUS_ARGS=${NEREUS_ARGS:-}
KEEP=${KEEP:-0}

say() { echo "kafka-tools-bench: $*" >&2; }
for tool in java mvn go python3; do
	command -v "$tool" >/dev/null || { say "$tool is required"; exit 2; }
done

libs="$CACHE/kafka-$KAFKA_VERSION/libs"
if [[ ! -f "$libs/kafka-tools-$KAFKA_VERSION.jar" || ! -f "$libs/kafka_2.13-$KAFKA_VERSION.jar" ]]; then
	say "resolving kafka_2.13 and kafka-tools $KAFKA_VERSION from Maven Central into $libs"
	mvnargs=(-q -B -Dkafka.version="$KAFKA_VERSION" -f "$root/scripts/kafka-dist/pom.xml")
	if [[ -n "${MAVEN_REPO:-}" ]]; then mvnargs+=(-Dmaven.repo.local="$MAVEN_REPO"); fi
	rm -rf "$libs.tmp"
	mvn "${mvnargs[@]}" dependency:copy-dependencies -DoutputDirectory="$libs.tmp" -DincludeScope=runtime >&2
	rm -rf "$libs" && mkdir -p "$(dirname "$libs")" && mv "$libs.tmp" "$libs"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/kafka-tools-bench.XXXXXX")"
kafka_pid="" nereus_pid=""
stop_pid() { # stop_pid PID: SIGTERM, wait up to 20 s, then SIGKILL
	local pid="$1"
	[[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 0
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
	kill -9 "$pid" 2>/dev/null || true
}
cleanup() {
	stop_pid "$nereus_pid"
	stop_pid "$kafka_pid"
	if [[ "$KEEP" == "1" ]]; then say "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

free_ports() { # free_ports N -> N free loopback ports
	python3 -c '
import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])
for s in ss: s.close()' "$1"
}
wait_port() { # wait_port PORT PID LOG
	for _ in $(seq 1 240); do
		if (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		if ! kill -0 "$2" 2>/dev/null; then cat "$3" >&2; say "process $2 exited"; exit 1; fi
		sleep 0.5
	done
	say "port $1 did not open"; exit 1
}

cat >"$work/log4j2.yaml" <<'LOG'
Configuration:
  Appenders:
    Console:
      name: STDERR
      target: SYSTEM_ERR
      PatternLayout:
        Pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDERR
LOG
jcp=(-cp "$libs/*" "-Dlog4j2.configurationFile=$work/log4j2.yaml")
tool() { java -Xmx512m "${jcp[@]}" "$@"; }

declare -A bootstrap
if [[ " $TARGETS " == *" kafka"* ]]; then
	read -r kport cport < <(free_ports 2)
	cat >"$work/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$kport,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$kport
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$work/kafka-data
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
num.partitions=1
PROPS
	cluster_id="$(java "${jcp[@]}" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)"
	java "${jcp[@]}" kafka.tools.StorageTool format --standalone -t "$cluster_id" -c "$work/server.properties" >"$work/kafka-format.log" 2>&1
	say "starting Apache Kafka $KAFKA_VERSION (KRaft, single node) on 127.0.0.1:$kport"
	java "-Xmx$KAFKA_HEAP" "-Xms$KAFKA_HEAP" "${jcp[@]}" kafka.Kafka "$work/server.properties" >"$work/kafka.log" 2>&1 &
	kafka_pid=$!
	wait_port "$kport" "$kafka_pid" "$work/kafka.log"
	bootstrap[kafka]="127.0.0.1:$kport"
	bootstrap[kafka-fsync]="127.0.0.1:$kport"
fi
if [[ " $TARGETS " == *" nereus "* ]]; then
	say "building nereus"
	(cd "$root" && go build -o "$work/nereus" ./cmd/nereus)
	read -r nport hport pport < <(free_ports 3)
	say "starting nereus serve (defaults; Kafka on 127.0.0.1:$nport) $NEREUS_ARGS"
	# shellcheck disable=SC2086 # NEREUS_ARGS is a list of flags
	"$work/nereus" serve --data-dir "$work/nereus-data" --kafka-addr "127.0.0.1:$nport" \
		--http-addr "127.0.0.1:$hport" --pulsar-addr "127.0.0.1:$pport" --log-level warn $NEREUS_ARGS \
		>"$work/nereus.log" 2>&1 &
	nereus_pid=$!
	wait_port "$nport" "$nereus_pid" "$work/nereus.log"
	bootstrap[nereus]="127.0.0.1:$nport"
fi

create_topic() { # create_topic TARGET TOPIC PARTITIONS
	local extra=()
	if [[ "$1" == "kafka-fsync" ]]; then extra=(--config flush.messages=1); fi
	tool org.apache.kafka.tools.TopicCommand --bootstrap-server "${bootstrap[$1]}" --create --topic "$2" \
		--partitions "$3" --replication-factor 1 "${extra[@]}" >>"$work/topics.log" 2>&1 ||
		{ cat "$work/topics.log" >&2; say "creating $2 on $1 failed"; exit 1; }
}

results="$work/results.tsv"
: >"$results"
for round in $(seq 1 "$ROUNDS"); do
	for t in $TARGETS; do
		topic="perf-$t-r$round-$RANDOM"
		create_topic "$t" "$topic" "$PARTITIONS"
		say "round $round/$ROUNDS: ProducerPerformance -> $t ($PERF_RECORDS x $RECORD_SIZE B, $PARTITIONS partitions, acks=all)"
		out="$work/perf-$t-$round.out"
		tool org.apache.kafka.tools.ProducerPerformance --topic "$topic" --num-records "$PERF_RECORDS" \
			--record-size "$RECORD_SIZE" --throughput -1 \
			--producer-props "bootstrap.servers=${bootstrap[$t]}" acks=all >"$out" 2>"$out.err" ||
			{ tail -20 "$out.err" >&2; say "ProducerPerformance against $t failed"; exit 1; }
		line="$(grep 'records sent' "$out" | tail -1)"
		echo "$line" >&2
		printf 'perf\t%s\t%s\t%s\n' "$t" "$round" "$line" >>"$results"
	done
	for t in $TARGETS; do
		topic="e2e-$t-r$round-$RANDOM"
		create_topic "$t" "$topic" 1
		say "round $round/$ROUNDS: EndToEndLatency -> $t ($E2E_MESSAGES x $RECORD_SIZE B, acks=all)"
		out="$work/e2e-$t-$round.out"
		tool org.apache.kafka.tools.EndToEndLatency "${bootstrap[$t]}" "$topic" "$E2E_MESSAGES" all "$RECORD_SIZE" \
			>"$out" 2>"$out.err" || { tail -20 "$out.err" >&2; say "EndToEndLatency against $t failed"; exit 1; }
		line="$(grep -E 'Avg latency|Percentiles' "$out" | tr '\n' ' ')"
		echo "$line" >&2
		printf 'e2e\t%s\t%s\t%s\n' "$t" "$round" "$line" >>"$results"
	done
done

python3 - "$results" "$KAFKA_VERSION" "$TARGETS" "$PARTITIONS" "$RECORD_SIZE" <<'PY'
import re, statistics, sys
path, kv, targets, parts, size = sys.argv[1:]
targets = targets.split()
perf, e2e = {t: [] for t in targets}, {t: [] for t in targets}
for line in open(path):
    kind, t, rnd, text = line.rstrip("\n").split("\t", 3)
    if kind == "perf":
        m = re.search(r"\(([\d.]+) MB/sec\).*?([\d.]+) ms avg latency.*?(\d+) ms 50th.*?(\d+) ms 99th", text)
        perf[t].append(dict(mbps=float(m[1]), avg=float(m[2]), p50=int(m[3]), p99=int(m[4])))
    else:
        m = re.search(r"Avg latency: ([\d.]+) ms.*?50th = (\d+), 99th = (\d+), 99.9th = (\d+)", text)
        e2e[t].append(dict(avg=float(m[1]), p50=int(m[2]), p99=int(m[3]), p999=int(m[4])))
med = lambda xs: statistics.median(xs) if xs else float("nan")
print()
print(f"### Kafka's own tools (kafka-tools {kv}); {len(perf[targets[0]])} rounds, alternating; shared 2-core machine")
print(f"ProducerPerformance: {parts} partitions, {size} B records, acks=all, one producer, unthrottled")
print(f"EndToEndLatency: one record at a time, acks=all, produce -> consume, {size} B (the tool reports whole ms)")
print()
print(f"{'target':<12} {'MB/s (per round)':<28} {'MB/s med':>9}  {'e2e p50':>7} {'e2e p99':>7} {'p99.9':>6} {'avg':>7}  e2e p50/p99 per round")
for t in targets:
    p, e = perf[t], e2e[t]
    rounds_tp = " ".join("%.1f" % x["mbps"] for x in p)
    rounds_lat = " ".join("%d/%d" % (x["p50"], x["p99"]) for x in e)
    print(f"{t:<12} {rounds_tp:<28} {med([x['mbps'] for x in p]):>9.2f}  "
          f"{med([x['p50'] for x in e]):>7} {med([x['p99'] for x in e]):>7} {med([x['p999'] for x in e]):>6} "
          f"{med([x['avg'] for x in e]):>7.2f}  {rounds_lat}")
if "nereus" in targets:
    n = perf["nereus"]; ne = e2e["nereus"]
    print()
    for k in [t for t in targets if t != "nereus"]:
        kp, ke = perf[k], e2e[k]
        tp = med([x["mbps"] for x in n]) / med([x["mbps"] for x in kp])
        # EndToEndLatency truncates to whole ms: a 0 ms percentile has no ratio.
        ratio = lambda a, b: "%.2fx" % (a / b) if b > 0 else "n/a (%s < 1 ms)" % k
        r50 = ratio(med([x["p50"] for x in ne]), med([x["p50"] for x in ke]))
        r99 = ratio(med([x["p99"] for x in ne]), med([x["p99"] for x in ke]))
        ravg = ratio(med([x["avg"] for x in ne]), med([x["avg"] for x in ke]))
        print(f"nereus / {k:<12} throughput {tp:.2f}x   e2e p50 {r50}   e2e p99 {r99}   e2e avg {ravg}   (latency: lower is better)")
    print()
    tpk = ""
    if "kafka" in targets:
        tpk = "throughput %.2fx kafka" % (med([x["mbps"] for x in n]) / med([x["mbps"] for x in perf["kafka"]]))
    print("issue 15 targets (default profile): e2e p50 <= 3 ms, p99 <= 15 ms, throughput >= 1.0x kafka; now:",
          "p50 %s ms, p99 %s ms, %s" % (med([x["p50"] for x in ne]), med([x["p99"] for x in ne]), tpk))
PY

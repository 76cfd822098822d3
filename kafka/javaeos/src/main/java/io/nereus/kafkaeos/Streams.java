package io.nereus.kafkaeos;

import java.io.File;
import java.nio.file.*;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.*;
import org.apache.kafka.streams.*;
import org.apache.kafka.streams.kstream.*;

/**
 * A Kafka Streams 4.x word count with processing.guarantee=exactly_once_v2
 * and a persistent state store whose changelog topic Streams creates with
 * cleanup.policy=compact. Phase 1 counts a first set of lines; the
 * application is closed and its local state directory deleted, so phase 2
 * must restore the store from the changelog before it counts a second set
 * of lines. The latest count per word in the output topic (read with
 * read_committed) must equal the exact totals after each phase. Between
 * the phases the changelog is compacted (its segment.ms lowered), so the
 * restore reads a compacted changelog whose log below the cleaned point
 * the broker has reclaimed.
 *
 * Usage: Streams BOOTSTRAP PREFIX STATE_DIR
 */
public final class Streams {
    static final String[] WORDS = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"};

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], prefix = args[1];
        Path stateDir = Paths.get(args[2]);
        String in = prefix + "-lines", out = prefix + "-counts", app = prefix + "-app";
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(in, 3, (short) 1), new NewTopic(out, 3, (short) 1)))
                    .all().get(60, TimeUnit.SECONDS);
        }
        Map<String, Long> want = new TreeMap<>();
        produceLines(bootstrap, in, 0, 400, want);
        runUntil(bootstrap, app, in, out, stateDir, want, "phase 1");

        // The changelog is compacted, as Streams asked.
        try (Admin admin = Admin.create(common)) {
            String changelog = app + "-counts-store-changelog";
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, changelog);
            String policy = admin.describeConfigs(List.of(res)).all().get(30, TimeUnit.SECONDS).get(res)
                    .get("cleanup.policy").value();
            if (!policy.contains("compact")) throw new IllegalStateException(changelog + " cleanup.policy=" + policy);
            System.out.println("streams: changelog " + changelog + " has cleanup.policy=" + policy);
            compactChangelog(bootstrap, admin, changelog);
        }
        deleteTree(stateDir.toFile()); // force a restore from the (compacted) changelog
        produceLines(bootstrap, in, 400, 700, want);
        runUntil(bootstrap, app, in, out, stateDir, want, "phase 2 (after restoring from the changelog)");
        System.out.println("OK");
    }

    /**
     * Streams creates its changelog with the default segment.ms (7 days),
     * so it would never be compacted within the test: lower it (and the
     * lag and dirty ratio) and wait until reading the changelog from the
     * beginning, read_committed as a restore does, shows each key once
     * (the compacted view; on a compact-only topic the log below the
     * cleaned point is reclaimed, so the restore reads the view).
     */
    static void compactChangelog(String bootstrap, Admin admin, String changelog) throws Exception {
        int[] before = readChangelog(bootstrap, changelog);
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, changelog);
        List<AlterConfigOp> ops = new ArrayList<>();
        for (String[] kv : new String[][]{{"segment.ms", "100"}, {"min.compaction.lag.ms", "0"}, {"min.cleanable.dirty.ratio", "0.01"}}) {
            ops.add(new AlterConfigOp(new ConfigEntry(kv[0], kv[1]), AlterConfigOp.OpType.SET));
        }
        admin.incrementalAlterConfigs(Map.<ConfigResource, Collection<AlterConfigOp>>of(res, ops)).all().get(30, TimeUnit.SECONDS);
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (true) {
            int[] now = readChangelog(bootstrap, changelog);
            if (now[1] == 0 && now[0] < before[0]) {
                System.out.printf("streams: changelog compacted: %d records (%d repeated keys) before, %d after%n", before[0], before[1], now[0]);
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("changelog never compacted: " + now[0] + " records, " + now[1] + " repeated keys (before: " + before[0] + ")");
            }
            Thread.sleep(300);
        }
    }

    /** Reads the whole changelog (read_committed); returns {records, records whose key was seen before}. */
    static int[] readChangelog(String bootstrap, String topic) {
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("isolation.level", "read_committed");
        c.put("key.deserializer", ByteArrayDeserializer.class.getName());
        c.put("value.deserializer", ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> cons = new KafkaConsumer<>(c)) {
            List<TopicPartition> tps = new ArrayList<>();
            cons.partitionsFor(topic).forEach(p -> tps.add(new TopicPartition(topic, p.partition())));
            cons.assign(tps);
            cons.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = cons.endOffsets(tps);
            Set<String> seen = new HashSet<>();
            int n = 0, repeated = 0;
            long deadline = System.nanoTime() + 30_000_000_000L;
            while (tps.stream().anyMatch(tp -> cons.position(tp) < ends.get(tp))) {
                if (System.nanoTime() > deadline) throw new IllegalStateException("reading " + topic + " never reached " + ends);
                for (ConsumerRecord<byte[], byte[]> r : cons.poll(Duration.ofMillis(200))) {
                    n++;
                    if (!seen.add(r.partition() + "/" + new String(r.key()))) repeated++;
                }
            }
            return new int[]{n, repeated};
        }
    }

    static void produceLines(String bootstrap, String topic, int from, int to, Map<String, Long> want) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
            for (int i = from; i < to; i++) {
                StringBuilder line = new StringBuilder();
                for (int k = 0; k <= i % 5; k++) {
                    String w = WORDS[(i * 7 + k * 3) % WORDS.length];
                    line.append(w).append(' ');
                    want.merge(w, 1L, Long::sum);
                }
                prod.send(new ProducerRecord<>(topic, Integer.toString(i), line.toString().trim()));
            }
            prod.flush();
        }
    }

    static void runUntil(String bootstrap, String app, String in, String out, Path stateDir,
                         Map<String, Long> want, String phase) throws Exception {
        StreamsBuilder b = new StreamsBuilder();
        b.stream(in, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(v -> Arrays.asList(v.split(" ")))
                .groupBy((k, w) -> w, Grouped.with(Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts-store"))
                .toStream()
                .to(out, Produced.with(Serdes.String(), Serdes.Long()));
        Properties sp = new Properties();
        sp.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        sp.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        sp.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        sp.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        sp.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        // No record cache: every count update goes to the changelog, so
        // there is something to compact.
        sp.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        sp.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        // Streams members do not leave the group on close; a short session
        // lets the restarted instance take over without waiting 45s.
        sp.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), "6000");
        sp.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), "1000");
        long t0 = System.nanoTime();
        try (KafkaStreams streams = new KafkaStreams(b.build(), sp)) {
            streams.setUncaughtExceptionHandler(e -> {
                e.printStackTrace();
                return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
            });
            streams.start();
            Map<String, Long> got = new TreeMap<>();
            Properties c = new Properties();
            c.put("bootstrap.servers", bootstrap);
            c.put("isolation.level", "read_committed");
            c.put("key.deserializer", StringDeserializer.class.getName());
            c.put("value.deserializer", LongDeserializer.class.getName());
            try (KafkaConsumer<String, Long> cons = new KafkaConsumer<>(c)) {
                List<TopicPartition> tps = new ArrayList<>();
                for (int i = 0; i < 3; i++) tps.add(new TopicPartition(out, i));
                cons.assign(tps);
                cons.seekToBeginning(tps);
                long deadline = System.nanoTime() + 180_000_000_000L;
                while (!got.equals(want)) {
                    if (streams.state() == KafkaStreams.State.ERROR || streams.state() == KafkaStreams.State.NOT_RUNNING) {
                        throw new IllegalStateException(phase + ": streams " + streams.state());
                    }
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException(phase + ": counts " + got + ", want " + want);
                    }
                    for (ConsumerRecord<String, Long> r : cons.poll(Duration.ofMillis(300))) {
                        Long prev = got.put(r.key(), r.value());
                        if (r.value() > want.getOrDefault(r.key(), 0L)) {
                            throw new IllegalStateException(phase + ": " + r.key() + " counted " + r.value() + " > " + want.get(r.key()) + " (not exactly once)");
                        }
                        if (prev != null && r.value() < prev) {
                            throw new IllegalStateException(phase + ": " + r.key() + " went back from " + prev + " to " + r.value());
                        }
                    }
                }
            }
            System.out.printf("streams: %s: exact counts %s after %.1fs%n", phase, want, (System.nanoTime() - t0) / 1e9);
            streams.close(Duration.ofSeconds(30));
        }
    }

    static void deleteTree(File f) {
        File[] kids = f.listFiles();
        if (kids != null) for (File k : kids) deleteTree(k);
        f.delete();
    }
}

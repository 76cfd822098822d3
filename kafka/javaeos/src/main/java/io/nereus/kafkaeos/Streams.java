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
 * read_committed) must equal the exact totals after each phase.
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
        }
        deleteTree(stateDir.toFile()); // force a restore from the changelog
        produceLines(bootstrap, in, 400, 700, want);
        runUntil(bootstrap, app, in, out, stateDir, want, "phase 2 (after restoring from the changelog)");
        System.out.println("OK");
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

package io.nereus.kafkaeos;

import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Java kafka-clients 4.x consumers with group.protocol=consumer (KIP-848,
 * the broker's uniform assignor):
 * 1. incremental rebalance: a second member joins a one-member group on a
 *    6-partition topic; the first member revokes only the 3 partitions that
 *    move, and every record is consumed;
 * 2. static membership: of two static members (group.instance.id), one
 *    closes and restarts within the session timeout; it gets its old
 *    partitions back and the other member sees no rebalance;
 * 3. with RESTARTED-FILE: the program prints "kip848: restart-server" and
 *    waits for that file, which the test creates once it has SIGKILLed and
 *    restarted the server; the group survives like on a Kafka broker
 *    restart: neither member sees a callback (revoke, lost or assign), both
 *    go on consuming and committing.
 *
 * Usage: Kip848 BOOTSTRAP PREFIX [RESTARTED-FILE]
 */
public final class Kip848 {
    static final int PARTITIONS = 6;

    /** One consumer polling on its own thread, recording callbacks. */
    static final class Member implements AutoCloseable {
        final String name;
        final Set<TopicPartition> owned = ConcurrentHashMap.newKeySet();
        final List<String> events = Collections.synchronizedList(new ArrayList<>());
        final Set<String> seen;
        final AtomicBoolean stop = new AtomicBoolean();
        final Thread thread;
        volatile Throwable failed;

        Member(String bootstrap, String group, String topic, String name, String instanceId, Set<String> seen) {
            this.name = name;
            this.seen = seen;
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("group.id", group);
            p.put("group.protocol", "consumer");
            p.put("group.remote.assignor", "uniform");
            p.put("auto.offset.reset", "earliest");
            p.put("key.deserializer", StringDeserializer.class.getName());
            p.put("value.deserializer", StringDeserializer.class.getName());
            if (instanceId != null) p.put("group.instance.id", instanceId);
            thread = new Thread(() -> {
                try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
                    c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                        public void onPartitionsRevoked(Collection<TopicPartition> ps) {
                            if (!ps.isEmpty()) events.add("revoked " + ps.size());
                            owned.removeAll(ps);
                        }
                        public void onPartitionsAssigned(Collection<TopicPartition> ps) {
                            if (!ps.isEmpty()) events.add("assigned " + ps.size());
                            owned.addAll(ps);
                        }
                        public void onPartitionsLost(Collection<TopicPartition> ps) {
                            events.add("lost " + ps.size());
                            owned.removeAll(ps);
                        }
                    });
                    while (!stop.get()) {
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) seen.add(r.value());
                        c.commitSync();
                    }
                } catch (Throwable t) {
                    failed = t;
                }
            }, name);
            thread.start();
        }

        public void close() throws InterruptedException {
            stop.set(true);
            thread.join(60_000);
            if (failed != null) throw new IllegalStateException(name + " failed", failed);
        }
    }

    static void waitFor(String what, long seconds, java.util.function.BooleanSupplier cond) throws InterruptedException {
        long deadline = System.nanoTime() + seconds * 1_000_000_000L;
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) throw new IllegalStateException("timed out waiting for " + what);
            Thread.sleep(50);
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], prefix = args[1];
        String topic = prefix + "-topic";
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all().get(60, TimeUnit.SECONDS);
        }
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(pp)) {
            for (int i = 0; i < 600; i++) prod.send(new ProducerRecord<>(topic, i % PARTITIONS, null, Integer.toString(i)));
            prod.flush();
        }

        // 1. Incremental rebalance.
        Set<String> seen = ConcurrentHashMap.newKeySet();
        String group = prefix + "-incremental";
        try (Member a = new Member(bootstrap, group, topic, "a", null, seen)) {
            waitFor("a owns all partitions", 60, () -> a.owned.size() == PARTITIONS);
            try (Member b = new Member(bootstrap, group, topic, "b", null, seen)) {
                waitFor("a and b own 3 each", 60, () -> a.owned.size() == 3 && b.owned.size() == 3);
                waitFor("all records consumed", 60, () -> seen.size() == 600);
                List<String> ev = new ArrayList<>(a.events);
                if (!ev.equals(List.of("assigned 6", "revoked 3"))) {
                    throw new IllegalStateException("member a saw " + ev + ", want [assigned 6, revoked 3] (incremental)");
                }
                System.out.println("kip848: incremental rebalance; a: " + ev + ", b: " + b.events);
            }
        }

        // 2. Static membership: restart without a rebalance.
        Set<String> seen2 = ConcurrentHashMap.newKeySet();
        String sgroup = prefix + "-static";
        Member s1 = new Member(bootstrap, sgroup, topic, "s1", "instance-1", seen2);
        Member s2 = new Member(bootstrap, sgroup, topic, "s2", "instance-2", seen2);
        waitFor("static members own 3 each", 60, () -> s1.owned.size() == 3 && s2.owned.size() == 3);
        Set<TopicPartition> before = new HashSet<>(s1.owned);
        List<String> s2Before = new ArrayList<>(s2.events);
        s1.close();
        Member s1b = new Member(bootstrap, sgroup, topic, "s1-restarted", "instance-1", seen2);
        waitFor("restarted static member owns its partitions", 60, () -> s1b.owned.size() == 3);
        Thread.sleep(2000); // a rebalance, if any, would show on s2 now
        if (!before.equals(new HashSet<>(s1b.owned))) {
            throw new IllegalStateException("restarted member got " + s1b.owned + ", had " + before);
        }
        if (!s2.events.equals(s2Before)) {
            throw new IllegalStateException("the other static member rebalanced: " + s2.events + " (was " + s2Before + ")");
        }
        System.out.println("kip848: static member restarted with its partitions " + before + "; the other member saw no rebalance");

        // 3. The server restarts under the group.
        if (args.length > 2) {
            java.nio.file.Path restarted = java.nio.file.Paths.get(args[2]);
            List<String> e1 = new ArrayList<>(s1b.events), e2 = new ArrayList<>(s2.events);
            System.out.println("kip848: restart-server");
            waitFor("the server restarted", 120, () -> java.nio.file.Files.exists(restarted));
            try (KafkaProducer<String, String> prod = new KafkaProducer<>(pp)) {
                for (int i = 0; i < 60; i++) prod.send(new ProducerRecord<>(topic, i % PARTITIONS, null, "after-" + i));
                prod.flush();
            }
            waitFor("records produced after the restart consumed", 120,
                    () -> seen2.stream().filter(v -> v.startsWith("after-")).count() == 60);
            Thread.sleep(3000); // several heartbeats (500 ms) of both members reach the restarted coordinator
            if (!s1b.events.equals(e1) || !s2.events.equals(e2)) {
                throw new IllegalStateException("the server restart rebalanced: " + s1b.events + " (was " + e1 + "), "
                        + s2.events + " (was " + e2 + ")");
            }
            if (s1b.failed != null || s2.failed != null) {
                throw new IllegalStateException("a member failed after the restart", s1b.failed != null ? s1b.failed : s2.failed);
            }
            System.out.println("kip848: server SIGKILLed and restarted; both members kept their partitions, no callback, consuming and committing");
        }
        s1b.close();
        s2.close();
        System.out.println("OK");
    }
}

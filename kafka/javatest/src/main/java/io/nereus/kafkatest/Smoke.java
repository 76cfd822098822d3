package io.nereus.kafkatest;

import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Drives the Java kafka-clients against a broker: the admin client creates
 * and inspects a topic, an idempotent producer (the 4.x default, acks=all)
 * writes records, a consumer group of two members (classic protocol, the 4.x
 * default) consumes them and commits, the admin client reads the committed
 * offsets back and deletes the topic. Exits non-zero on any mismatch.
 *
 * Usage: Smoke BOOTSTRAP TOPIC GROUP
 */
public final class Smoke {
    static void check(boolean ok, String msg) {
        if (!ok) throw new IllegalStateException("check failed: " + msg);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        final int partitions = 3, n = 300;
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);

        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(30, TimeUnit.SECONDS);
            TopicDescription td = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
            check(td.partitions().size() == partitions, "partitions " + td.partitions().size());
            Collection<org.apache.kafka.common.Node> nodes = admin.describeCluster().nodes().get(30, TimeUnit.SECONDS);
            check(!nodes.isEmpty(), "no nodes");
            check(admin.describeCluster().controller().get(30, TimeUnit.SECONDS) != null, "no controller");
            check(admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(topic), "topic not listed");
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            admin.incrementalAlterConfigs(Map.of(res, List.of(new AlterConfigOp(
                    new org.apache.kafka.clients.admin.ConfigEntry("retention.ms", "3600000"), AlterConfigOp.OpType.SET))))
                    .all().get(30, TimeUnit.SECONDS);
            Config cfg = admin.describeConfigs(List.of(res)).all().get(30, TimeUnit.SECONDS).get(res);
            check("3600000".equals(cfg.get("retention.ms").value()), "retention.ms " + cfg.get("retention.ms"));
            System.out.println("admin: created " + topic + " with " + partitions + " partitions; retention.ms altered");
        }

        Properties pp = new Properties();
        pp.putAll(common);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        pp.put("linger.ms", "5");
        pp.put("compression.type", "lz4");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                fs.add(producer.send(new ProducerRecord<>(topic, "k" + (i % 17), "v" + i)));
            }
            for (Future<RecordMetadata> f : fs) f.get(60, TimeUnit.SECONDS);
            System.out.println("producer: " + n + " records acknowledged (idempotent, acks=all)");
        }

        Set<String> seen = ConcurrentHashMap.newKeySet();
        AtomicBoolean stop = new AtomicBoolean();
        ExecutorService pool = Executors.newFixedThreadPool(2);
        List<Future<?>> members = new ArrayList<>();
        for (int m = 0; m < 2; m++) {
            members.add(pool.submit(() -> {
                Properties cp = new Properties();
                cp.putAll(common);
                cp.put("group.id", group);
                cp.put("key.deserializer", StringDeserializer.class.getName());
                cp.put("value.deserializer", StringDeserializer.class.getName());
                cp.put("auto.offset.reset", "earliest");
                cp.put("enable.auto.commit", "false");
                cp.put("heartbeat.interval.ms", "500");
                try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
                    c.subscribe(List.of(topic));
                    while (!stop.get()) {
                        ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                        for (ConsumerRecord<String, String> r : recs) seen.add(r.partition() + "/" + r.offset());
                        if (!recs.isEmpty()) c.commitSync();
                    }
                }
                return null;
            }));
        }
        long deadline = System.currentTimeMillis() + 90_000;
        while (seen.size() < n && System.currentTimeMillis() < deadline) Thread.sleep(50);
        stop.set(true);
        for (Future<?> f : members) f.get(60, TimeUnit.SECONDS);
        pool.shutdown();
        check(seen.size() == n, "consumed " + seen.size() + " of " + n);
        System.out.println("consumer group: 2 members consumed " + n + " records and committed");

        try (Admin admin = Admin.create(common)) {
            Map<TopicPartition, OffsetAndMetadata> offs = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
            long sum = 0;
            for (OffsetAndMetadata o : offs.values()) sum += o.offset();
            check(sum == n, "committed offsets sum " + sum);
            ConsumerGroupDescription gd = admin.describeConsumerGroups(List.of(group)).all().get(30, TimeUnit.SECONDS).get(group);
            System.out.println("admin: group " + group + " state " + gd.groupState() + ", committed sum " + sum);
            admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
            check(!admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(topic), "topic still listed");
        }
        System.out.println("OK");
    }
}

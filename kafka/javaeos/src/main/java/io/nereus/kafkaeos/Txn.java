package io.nereus.kafkaeos;

import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A transactional producer (kafka-clients 4.x) commits and aborts
 * transactions of PER_TXN records over three partitions for SECONDS seconds
 * while the test SIGKILLs and restarts the server. On any error it closes
 * the producer and starts a new instance with the same transactional.id.
 * A read_committed consumer reads concurrently the whole time. Afterwards a
 * second read_committed consumer reads everything, and both views are
 * checked: every transaction whole or absent, every acknowledged commit
 * whole, no acknowledged abort visible, nothing seen concurrently that is
 * not committed in the end.
 *
 * Usage: Txn BOOTSTRAP TOPIC SECONDS
 */
public final class Txn {
    static final int PARTITIONS = 3, PER_TXN = 5;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        long seconds = Long.parseLong(args[2]);
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all().get(60, TimeUnit.SECONDS);
        }
        Map<Integer, Character> outcomes = new ConcurrentHashMap<>();
        Set<String> seenLive = ConcurrentHashMap.newKeySet();
        AtomicBoolean stop = new AtomicBoolean();
        Thread live = new Thread(() -> {
            try (KafkaConsumer<String, String> c = consumer(bootstrap)) {
                c.assign(partitions(topic));
                c.seekToBeginning(partitions(topic));
                while (!stop.get()) {
                    try {
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) seenLive.add(r.value());
                    } catch (Exception e) {
                        // the server is down; the consumer reconnects
                    }
                }
            }
        });
        live.start();

        long end = System.nanoTime() + seconds * 1_000_000_000L;
        KafkaProducer<String, String> p = null;
        int i = 0;
        while (System.nanoTime() < end) {
            try {
                if (p == null) {
                    p = producer(bootstrap, "java-txn-" + topic);
                    p.initTransactions();
                }
                boolean commit = i % 4 != 3;
                p.beginTransaction();
                List<Future<RecordMetadata>> fs = new ArrayList<>();
                for (int j = 0; j < PER_TXN; j++) {
                    fs.add(p.send(new ProducerRecord<>(topic, j % PARTITIONS, null, i + "-" + j)));
                }
                for (Future<RecordMetadata> f : fs) f.get(30, TimeUnit.SECONDS);
                if (commit) p.commitTransaction(); else p.abortTransaction();
                outcomes.put(i, commit ? 'c' : 'a');
            } catch (Exception e) {
                outcomes.put(i, 'u');
                if (p != null) {
                    try { p.close(Duration.ZERO); } catch (Exception ignored) { }
                    p = null;
                }
                Thread.sleep(200);
            }
            i++;
        }
        if (p != null) p.close(Duration.ofSeconds(10));
        stop.set(true);
        live.join();

        // Final read: everything up to the last stable offset, which reaches
        // the end once every transaction is finished.
        Map<Integer, Set<Integer>> got = new HashMap<>();
        try (KafkaConsumer<String, String> c = consumer(bootstrap)) {
            List<TopicPartition> tps = partitions(topic);
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.nanoTime() + 120_000_000_000L;
            Map<TopicPartition, Long> ends = c.endOffsets(tps);
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) if (c.position(tp) < ends.get(tp)) done = false;
                if (done) break;
                if (System.nanoTime() > deadline) throw new IllegalStateException("read_committed never reached " + ends);
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    String[] parts = r.value().split("-");
                    Set<Integer> s = got.computeIfAbsent(Integer.parseInt(parts[0]), k -> new HashSet<>());
                    if (!s.add(Integer.parseInt(parts[1]))) throw new IllegalStateException("read twice: " + r.value());
                }
                ends = c.endOffsets(tps);
            }
        }
        int committed = 0, aborted = 0, unknown = 0, unknownCommitted = 0;
        for (Map.Entry<Integer, Character> e : outcomes.entrySet()) {
            int n = got.getOrDefault(e.getKey(), Set.of()).size();
            if (n != 0 && n != PER_TXN) throw new IllegalStateException("transaction " + e.getKey() + " partially visible: " + n);
            switch (e.getValue()) {
                case 'c': committed++; if (n != PER_TXN) throw new IllegalStateException("acknowledged commit " + e.getKey() + " missing"); break;
                case 'a': aborted++; if (n != 0) throw new IllegalStateException("acknowledged abort " + e.getKey() + " visible"); break;
                default: unknown++; if (n == PER_TXN) unknownCommitted++;
            }
        }
        for (int k : got.keySet()) if (!outcomes.containsKey(k)) throw new IllegalStateException("records of unknown transaction " + k);
        for (String v : seenLive) {
            String[] parts = v.split("-");
            if (got.getOrDefault(Integer.parseInt(parts[0]), Set.of()).size() != PER_TXN) {
                throw new IllegalStateException("live read_committed consumer saw " + v + " of a transaction that did not commit");
            }
        }
        if (committed == 0 || aborted == 0) throw new IllegalStateException("too little happened: " + outcomes);
        System.out.printf("txn: %d committed, %d aborted, %d interrupted (%d completed as commits); live consumer saw %d records, all committed%n",
                committed, aborted, unknown, unknownCommitted, seenLive.size());
        System.out.println("OK");
    }

    static List<TopicPartition> partitions(String topic) {
        List<TopicPartition> out = new ArrayList<>();
        for (int i = 0; i < PARTITIONS; i++) out.add(new TopicPartition(topic, i));
        return out;
    }

    static KafkaConsumer<String, String> consumer(String bootstrap) {
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("isolation.level", IsolationLevel.READ_COMMITTED.toString().toLowerCase(Locale.ROOT));
        c.put("enable.auto.commit", "false");
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        return new KafkaConsumer<>(c);
    }

    static KafkaProducer<String, String> producer(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", txnId);
        p.put("transaction.timeout.ms", "20000");
        p.put("max.block.ms", "20000");
        p.put("delivery.timeout.ms", "20000");
        p.put("request.timeout.ms", "5000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }
}

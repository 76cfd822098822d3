package io.nereus.kafkatest;

import java.time.Duration;
import java.util.*;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Keeps an idempotent producer (acks=all, the 4.x defaults) and one classic
 * consumer-group member flowing for a while, so a test can kill, restart
 * and stop brokers meanwhile. Prints one line per acknowledged record
 * ("ACK value partition offset"), per consumed record ("RECV value
 * partition offset") and per failed send ("ERR value message"), then
 * "DONE". Producing stops when stdin closes; consuming goes on until
 * every acknowledged record was consumed (or 60 s pass).
 *
 * Usage: ClusterFlow BOOTSTRAP TOPIC GROUP
 */
public final class ClusterFlow {
    static synchronized void out(String s) { System.out.println(s); System.out.flush(); }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        AtomicBoolean stopProducing = new AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try { while (System.in.read() >= 0) { } } catch (Exception e) { }
            stopProducing.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();

        Set<String> acked = Collections.synchronizedSet(new HashSet<>());
        Set<String> consumed = Collections.synchronizedSet(new HashSet<>());
        AtomicBoolean stopConsuming = new AtomicBoolean();
        Thread consumer = new Thread(() -> {
            Properties cp = new Properties();
            cp.put("bootstrap.servers", bootstrap);
            cp.put("group.id", group);
            cp.put("key.deserializer", StringDeserializer.class.getName());
            cp.put("value.deserializer", StringDeserializer.class.getName());
            cp.put("auto.offset.reset", "earliest");
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
                c.subscribe(List.of(topic));
                while (!stopConsuming.get()) {
                    try {
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                            consumed.add(r.value());
                            out("RECV " + r.value() + " " + r.partition() + " " + r.offset());
                        }
                    } catch (Exception e) {
                        out("WARN consumer " + e);
                    }
                }
            }
        });
        consumer.start();

        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        pp.put("linger.ms", "5");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            for (int i = 0; !stopProducing.get(); i++) {
                final String v = Integer.toString(i);
                producer.send(new ProducerRecord<>(topic, "k" + (i % 13), v), (md, err) -> {
                    if (err != null) {
                        out("ERR " + v + " " + err);
                    } else {
                        acked.add(v);
                        out("ACK " + v + " " + md.partition() + " " + md.offset());
                    }
                });
                Thread.sleep(4);
            }
            producer.flush();
        }
        long deadline = System.currentTimeMillis() + 60_000;
        while (System.currentTimeMillis() < deadline) {
            boolean all;
            synchronized (acked) { all = consumed.containsAll(acked); }
            if (all) break;
            Thread.sleep(200);
        }
        stopConsuming.set(true);
        consumer.join();
        out("DONE");
    }
}

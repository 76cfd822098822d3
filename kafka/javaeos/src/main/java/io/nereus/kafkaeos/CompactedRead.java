package io.nereus.kafkaeos;

import java.time.Duration;
import java.util.*;

import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Reads every partition of a (compacted) topic from offset 0 to its end
 * with a fresh Java consumer and prints one line per record:
 * "REC partition offset key value" (value "<null>" for a tombstone), then
 * "OK". The Go test compares the lines with the last record per key.
 *
 * Usage: CompactedRead BOOTSTRAP TOPIC PARTITIONS read_committed|read_uncommitted
 */
public final class CompactedRead {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, args[3]);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        int n = Integer.parseInt(args[2]);
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < n; i++) tps.add(new TopicPartition(args[1], i));
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            long deadline = System.currentTimeMillis() + 60_000;
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (c.position(tp) < end.get(tp)) done = false;
                }
                if (done) break;
                if (System.currentTimeMillis() > deadline) throw new RuntimeException("timed out before the end offsets " + end);
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    System.out.println("REC " + r.partition() + " " + r.offset() + " " + r.key() + " " + (r.value() == null ? "<null>" : r.value()));
                }
            }
        }
        System.out.println("OK");
    }
}

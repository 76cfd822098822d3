package io.nereus.koptest;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Produces n keyed records with a header and a timestamp to a Pulsar topic
 * (named persistent://tenant/ns/topic) through the Kafka listener, then
 * reads them back in a consumer group and commits. Prints KOP-JAVA-OK.
 * Args: bootstrap topic n group baseTimestampMs
 */
public final class Main {
  public static void main(String[] args) throws Exception {
    String bootstrap = args[0], topic = args[1], group = args[3];
    int n = Integer.parseInt(args[2]);
    long base = Long.parseLong(args[4]);

    Properties pp = new Properties();
    pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    pp.put(ProducerConfig.ACKS_CONFIG, "all");
    pp.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4");
    pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    try (KafkaProducer<String, String> p = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
      long last = -1;
      for (int i = 0; i < n; i++) {
        RecordHeaders h = new RecordHeaders();
        h.add("seq", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
        h.add("client", "java".getBytes(StandardCharsets.UTF_8));
        RecordMetadata md = p.send(new ProducerRecord<>(topic, null, base + i, "jk-" + (i % 5), "java-" + i, h)).get();
        if (md.offset() != last + 1) {
          throw new IllegalStateException("offset " + md.offset() + " after " + last);
        }
        last = md.offset();
      }
      System.out.println("produced " + n + " records, last offset " + last);
    }

    Properties cp = new Properties();
    cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer())) {
      c.subscribe(List.of(topic));
      int got = 0;
      long deadline = System.currentTimeMillis() + 60_000;
      while (got < n && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
          if (r.offset() != got || !r.value().equals("java-" + got) || !r.key().equals("jk-" + (got % 5))
              || r.timestamp() != base + got
              || !new String(r.headers().lastHeader("seq").value(), StandardCharsets.UTF_8).equals(Integer.toString(got))) {
            throw new IllegalStateException("record " + got + ": " + r);
          }
          got++;
        }
      }
      if (got != n) {
        throw new IllegalStateException("consumed " + got + " of " + n);
      }
      c.commitSync();
      System.out.println("consumed and committed " + got + " records");
    }
    System.out.println("KOP-JAVA-OK");
  }
}

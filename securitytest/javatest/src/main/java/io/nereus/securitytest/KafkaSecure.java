package io.nereus.securitytest;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java clients over SASL_SSL with SCRAM against Nereus.
 *
 * <pre>KafkaSecure MODE BOOTSTRAP CA_PEM USER PASSWORD TOPIC GROUP</pre>
 *
 * MODE sasl: an idempotent acks=all producer, a consumer group reading the
 * records back, and the admin client creating a SCRAM user (carol) that then
 * logs in. MODE refused: every client must fail with a
 * SaslAuthenticationException. Prints OK at the end.
 */
public final class KafkaSecure {
    static Properties common(String bootstrap, String ca, String mech, String user, String pass) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("security.protocol", "SASL_SSL");
        p.put("sasl.mechanism", mech);
        p.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                + user + "\" password=\"" + pass + "\";");
        p.put("ssl.truststore.type", "PEM");
        p.put("ssl.truststore.location", ca);
        p.put("request.timeout.ms", "20000");
        p.put("default.api.timeout.ms", "30000");
        return p;
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0], bootstrap = args[1], ca = args[2], user = args[3], pass = args[4], topic = args[5], group = args[6];
        switch (mode) {
            case "sasl" -> sasl(bootstrap, ca, user, pass, topic, group);
            case "refused" -> refused(bootstrap, ca, user, pass, topic, group);
            default -> throw new IllegalArgumentException(mode);
        }
        System.out.println("OK");
    }

    static void sasl(String bootstrap, String ca, String user, String pass, String topic, String group) throws Exception {
        Properties pp = common(bootstrap, ca, "SCRAM-SHA-512", user, pass);
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            for (int i = 0; i < 50; i++) {
                producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i)).get();
            }
        }
        System.out.println("produced 50 over SASL_SSL/SCRAM-SHA-512");

        Properties cp = common(bootstrap, ca, "SCRAM-SHA-256", user, pass);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            consumer.subscribe(Collections.singletonList(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (got.size() < 50 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    got.add(r.value());
                }
            }
            consumer.commitSync();
        }
        if (got.size() != 50 || !got.get(0).equals("v0") || !got.get(49).equals("v49")) {
            throw new AssertionError("consumed " + got.size() + " records: " + got);
        }
        System.out.println("consumed 50 in group " + group + " over SASL_SSL/SCRAM-SHA-256");

        try (Admin admin = Admin.create(common(bootstrap, ca, "SCRAM-SHA-512", user, pass))) {
            admin.alterUserScramCredentials(List.of(
                    new UserScramCredentialUpsertion("carol", new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), "carol-secret")))
                    .all().get();
            Map<String, UserScramCredentialsDescription> d = admin.describeUserScramCredentials(List.of("carol")).all().get();
            ScramCredentialInfo info = d.get("carol").credentialInfos().get(0);
            if (info.mechanism() != ScramMechanism.SCRAM_SHA_256 || info.iterations() != 8192) {
                throw new AssertionError("describe carol: " + d);
            }
            System.out.println("admin: created carol " + info);
        }
        try (Admin carol = Admin.create(common(bootstrap, ca, "SCRAM-SHA-256", "carol", "carol-secret"))) {
            System.out.println("carol sees " + carol.describeCluster().nodes().get().size() + " broker(s)");
        }
    }

    static void refused(String bootstrap, String ca, String user, String pass, String topic, String group) throws Exception {
        Properties ap = common(bootstrap, ca, "SCRAM-SHA-256", user, pass);
        try (Admin admin = Admin.create(ap)) {
            admin.listTopics().names().get();
            throw new AssertionError("admin authenticated as " + user + " with a wrong password");
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof SaslAuthenticationException)) {
                throw new AssertionError("admin: want SaslAuthenticationException, got " + e.getCause(), e);
            }
            System.out.println("admin refused: " + e.getCause().getMessage());
        }
        Properties cp = common(bootstrap, ca, "SCRAM-SHA-512", user, pass);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            consumer.subscribe(Collections.singletonList(topic));
            consumer.poll(Duration.ofSeconds(10));
            throw new AssertionError("consumer polled without failing");
        } catch (SaslAuthenticationException e) {
            System.out.println("consumer refused: " + e.getMessage());
        }
    }
}

package io.nereus.securitytest;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
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
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.errors.GroupAuthorizationException;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
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
 * SaslAuthenticationException. MODE acls: USER (a super user) grants erin
 * (password erin-secret) WRITE and READ on TOPIC, READ on GROUP and CREATE on
 * TOPIC-created through createAcls; describeAcls must return them; erin's
 * produce, fetch, group join and topic creation are allowed exactly there and
 * refused with Kafka's authorization exceptions elsewhere; after deleteAcls
 * erin may no longer produce. Prints OK at the end.
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
            case "acls" -> acls(bootstrap, ca, user, pass, topic, group);
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

    static Properties producerProps(Properties p) {
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        return p;
    }

    static Properties consumerProps(Properties p, String group) {
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return p;
    }

    static void expectCause(String what, Exception e, Class<?> want) {
        Throwable c = e;
        while (c != null && !want.isInstance(c)) {
            c = c.getCause();
        }
        if (c == null) {
            throw new AssertionError(what + ": want " + want.getSimpleName() + ", got " + e, e);
        }
        log(what + " refused: " + c.getClass().getSimpleName() + ": " + c.getMessage());
    }

    static final long START = System.currentTimeMillis();

    static void log(String msg) {
        System.out.printf("[%5.1fs] %s%n", (System.currentTimeMillis() - START) / 1000.0, msg);
    }

    static void acls(String bootstrap, String ca, String user, String pass, String topic, String group) throws Exception {
        String erin = "User:erin", created = topic + "-created", other = topic + "-other";
        try (Admin admin = Admin.create(common(bootstrap, ca, "SCRAM-SHA-512", user, pass))) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1), new NewTopic(other, 1, (short) 1))).all().get();
            List<AclBinding> bindings = List.of(
                    new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                            new AccessControlEntry(erin, "*", AclOperation.WRITE, AclPermissionType.ALLOW)),
                    new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                            new AccessControlEntry(erin, "*", AclOperation.READ, AclPermissionType.ALLOW)),
                    new AclBinding(new ResourcePattern(ResourceType.GROUP, group, PatternType.LITERAL),
                            new AccessControlEntry(erin, "*", AclOperation.READ, AclPermissionType.ALLOW)),
                    new AclBinding(new ResourcePattern(ResourceType.TOPIC, created, PatternType.LITERAL),
                            new AccessControlEntry(erin, "*", AclOperation.CREATE, AclPermissionType.ALLOW)));
            admin.createAcls(bindings).all().get();
            AclBindingFilter erinFilter = new AclBindingFilter(ResourcePatternFilter.ANY,
                    new AccessControlEntryFilter(erin, null, AclOperation.ANY, AclPermissionType.ANY));
            var described = admin.describeAcls(erinFilter).values().get();
            if (described.size() != 4 || !described.containsAll(bindings)) {
                throw new AssertionError("describeAcls: " + described);
            }
            log("describeAcls round-trips " + described.size() + " bindings");
            // Producing needs data before erin reads it.
            try (KafkaProducer<String, String> p = new KafkaProducer<>(producerProps(common(bootstrap, ca, "SCRAM-SHA-512", user, pass)))) {
                p.send(new ProducerRecord<>(other, "k", "not for erin")).get();
            }
        }

        Properties ep = common(bootstrap, ca, "SCRAM-SHA-256", "erin", "erin-secret");
        try (KafkaProducer<String, String> p = new KafkaProducer<>(producerProps((Properties) ep.clone()))) {
            p.send(new ProducerRecord<>(topic, "k", "v")).get();
            log("erin produced to " + topic);
            try {
                p.send(new ProducerRecord<>(other, "k", "v")).get();
                throw new AssertionError("erin produced to " + other);
            } catch (ExecutionException e) {
                expectCause("produce to " + other, e, TopicAuthorizationException.class);
            }
        }
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps((Properties) ep.clone(), group))) {
            c.subscribe(List.of(topic));
            List<String> got = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 60_000;
            while (got.isEmpty() && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    got.add(r.value());
                }
            }
            if (!got.equals(List.of("v"))) {
                throw new AssertionError("erin consumed " + got);
            }
            log("erin joined " + group + " and fetched " + got);
        }
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps((Properties) ep.clone(), group + "-not-granted"))) {
            c.subscribe(List.of(topic));
            c.poll(Duration.ofSeconds(15));
            throw new AssertionError("erin joined a group without READ on it");
        } catch (GroupAuthorizationException e) {
            log("group join refused: " + e.getMessage());
        }
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps((Properties) ep.clone(), group))) {
            c.assign(List.of(new org.apache.kafka.common.TopicPartition(other, 0)));
            c.seekToBeginning(c.assignment());
            var recs = c.poll(Duration.ofSeconds(15));
            throw new AssertionError("erin fetched " + other + ": " + recs.count() + " records");
        } catch (TopicAuthorizationException e) {
            log("fetch refused: " + e.getMessage());
        }
        try (Admin ea = Admin.create((Properties) ep.clone())) {
            ea.createTopics(List.of(new NewTopic(created, 1, (short) 1))).all().get();
            log("erin created " + created);
            try {
                ea.createTopics(List.of(new NewTopic(topic + "-forbidden", 1, (short) 1))).all().get();
                throw new AssertionError("erin created a topic without CREATE");
            } catch (ExecutionException e) {
                expectCause("create topic", e, TopicAuthorizationException.class);
            }
        }
        try (Admin admin = Admin.create(common(bootstrap, ca, "SCRAM-SHA-512", user, pass))) {
            var deleted = admin.deleteAcls(List.of(new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.LITERAL),
                    new AccessControlEntryFilter(erin, null, AclOperation.WRITE, AclPermissionType.ALLOW)))).all().get();
            if (deleted.size() != 1) {
                throw new AssertionError("deleteAcls removed " + deleted);
            }
        }
        // Without WRITE on any topic an idempotent producer is refused its
        // producer id (InitProducerId needs IDEMPOTENT_WRITE or WRITE on some
        // topic), as in Kafka; a non-idempotent one gets the topic error.
        // The refusal reaches send() either through its future or, when the
        // producer's InitProducerId already failed before send() was called,
        // as a KafkaException thrown by send() itself (the transaction
        // manager is then in its error state): both carry the cluster error.
        try (KafkaProducer<String, String> p = new KafkaProducer<>(producerProps((Properties) ep.clone()))) {
            p.send(new ProducerRecord<>(topic, "k", "v2")).get();
            throw new AssertionError("erin produced after her WRITE ACL was deleted");
        } catch (ExecutionException | org.apache.kafka.common.KafkaException e) {
            expectCause("idempotent produce after deleteAcls", e, org.apache.kafka.common.errors.ClusterAuthorizationException.class);
        }
        Properties plain = producerProps((Properties) ep.clone());
        plain.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
        try (KafkaProducer<String, String> p = new KafkaProducer<>(plain)) {
            p.send(new ProducerRecord<>(topic, "k", "v2")).get();
            throw new AssertionError("erin produced after her WRITE ACL was deleted");
        } catch (ExecutionException e) {
            expectCause("produce after deleteAcls", e, TopicAuthorizationException.class);
        }
    }
}

package io.nereus.pulsartest;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;

/**
 * Exercises the Java Pulsar client against a Nereus broker:
 *
 * <ol>
 *   <li>consumes the {@code goCount} messages "go-i" the Go test produced (interop Go -> Java);
 *   <li>produces {@code javaCount} messages "java-i" with batching on and as many "java-nb-i"
 *       without batching (the Go test then consumes them: interop Java -> Go);
 *   <li>round-trips its own messages on a second topic with a Shared subscription, acks with
 *       receipts, a string schema, a reader from the earliest position and a seek.
 * </ol>
 *
 * Args: serviceUrl topic goCount javaCount. Exits non-zero with a message on any mismatch.
 */
public final class Main {
    public static void main(String[] args) throws Exception {
        String url = args[0];
        String topic = args[1];
        int goCount = Integer.parseInt(args[2]);
        int javaCount = Integer.parseInt(args[3]);
        try (PulsarClient client = PulsarClient.builder().serviceUrl(url)
                .operationTimeout(30, TimeUnit.SECONDS).build()) {
            // 1. Go -> Java.
            try (Consumer<byte[]> c = client.newConsumer().topic(topic).subscriptionName("java-sub")
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe()) {
                for (int i = 0; i < goCount; i++) {
                    Message<byte[]> m = c.receive(30, TimeUnit.SECONDS);
                    check(m != null, "timed out waiting for go-" + i);
                    String s = new String(m.getValue(), StandardCharsets.UTF_8);
                    check(s.equals("go-" + i), "got " + s + " want go-" + i);
                    c.acknowledge(m);
                }
            }
            // 2. Java -> Go, batched and not batched.
            try (Producer<byte[]> p = client.newProducer().topic(topic).enableBatching(true)
                    .batchingMaxPublishDelay(5, TimeUnit.MILLISECONDS).create()) {
                List<CompletableFuture<MessageId>> fs = new ArrayList<>();
                for (int i = 0; i < javaCount; i++) {
                    fs.add(p.sendAsync(("java-" + i).getBytes(StandardCharsets.UTF_8)));
                }
                p.flush();
                for (CompletableFuture<MessageId> f : fs) {
                    f.get(30, TimeUnit.SECONDS);
                }
            }
            try (Producer<byte[]> p = client.newProducer().topic(topic).enableBatching(false).create()) {
                for (int i = 0; i < javaCount; i++) {
                    p.send(("java-nb-" + i).getBytes(StandardCharsets.UTF_8));
                }
            }
            // 3. Java round trip on its own topic.
            String own = topic + "-java";
            try (Consumer<String> c = client.newConsumer(Schema.STRING).topic(own).subscriptionName("shared")
                    .subscriptionType(SubscriptionType.Shared).isAckReceiptEnabled(true)
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
                 Producer<String> p = client.newProducer(Schema.STRING).topic(own).create()) {
                MessageId third = null;
                for (int i = 0; i < 20; i++) {
                    MessageId id = p.send("own-" + i);
                    if (i == 3) {
                        third = id;
                    }
                }
                Set<String> got = new HashSet<>();
                for (int i = 0; i < 20; i++) {
                    Message<String> m = c.receive(30, TimeUnit.SECONDS);
                    check(m != null, "timed out on own topic after " + got.size());
                    got.add(m.getValue());
                    c.acknowledge(m); // waits for the ack receipt
                }
                check(got.size() == 20, "own topic: " + got.size() + " distinct messages");
                // Everything is acknowledged; the seek rewinds the cursor to
                // own-3's entry and the Java client (exclusive start, its
                // default) hands out the messages after it again.
                c.seek(third);
                Message<String> m = c.receive(30, TimeUnit.SECONDS);
                check(m != null && m.getValue().equals("own-4"), "after seek got " + (m == null ? null : m.getValue()));
                try (Reader<String> r = client.newReader(Schema.STRING).topic(own).startMessageId(MessageId.earliest).create()) {
                    for (int i = 0; i < 20; i++) {
                        Message<String> rm = r.readNext(30, TimeUnit.SECONDS);
                        check(rm != null && rm.getValue().equals("own-" + i), "reader at " + i + " got " + (rm == null ? null : rm.getValue()));
                    }
                    check(!r.hasMessageAvailable(), "reader: hasMessageAvailable at the end");
                }
            }
        }
        System.out.println("JAVA-OK");
    }

    private static void check(boolean ok, String msg) {
        if (!ok) {
            System.err.println("JAVA-FAIL: " + msg);
            System.exit(2);
        }
    }
}

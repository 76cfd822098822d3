package io.nereus.securitytest;

import java.util.concurrent.TimeUnit;

import org.apache.pulsar.client.api.AuthenticationFactory;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;

/**
 * The Java Pulsar client with token authentication over TLS against Nereus.
 *
 * <pre>PulsarSecure PULSAR_SSL_URL HTTPS_URL CA_PEM TOPIC GOOD EXPIRED FORGED NO_PERMISSION</pre>
 *
 * With the good token it produces and consumes over pulsar+ssl:// and
 * produces over the https:// service URL (HTTP lookup); the expired and
 * forged tokens must fail with AuthenticationException, the role without
 * permission with AuthorizationException. Prints OK at the end.
 */
public final class PulsarSecure {
    static PulsarClient client(String url, String ca, String token) throws Exception {
        return PulsarClient.builder().serviceUrl(url).tlsTrustCertsFilePath(ca).enableTlsHostnameVerification(true)
                .authentication(AuthenticationFactory.token(token))
                .operationTimeout(5, TimeUnit.SECONDS).connectionTimeout(5, TimeUnit.SECONDS).build();
    }

    public static void main(String[] args) throws Exception {
        String pulsarUrl = args[0], httpsUrl = args[1], ca = args[2], topic = args[3];
        String good = args[4], expired = args[5], forged = args[6], noPerm = args[7];
        try (PulsarClient c = client(pulsarUrl, ca, good);
             Consumer<byte[]> cons = c.newConsumer().topic(topic).subscriptionName("java").subscribe();
             Producer<byte[]> p = c.newProducer().topic(topic).create()) {
            p.send("over pulsar+ssl".getBytes());
            Message<byte[]> m = cons.receive(30, TimeUnit.SECONDS);
            if (m == null || !new String(m.getData()).equals("over pulsar+ssl")) {
                throw new AssertionError("received " + m);
            }
            cons.acknowledge(m);
            System.out.println("produced and consumed over " + pulsarUrl);
        }
        try (PulsarClient c = client(httpsUrl, ca, good); Producer<byte[]> p = c.newProducer().topic(topic).create()) {
            p.send("over https lookup".getBytes());
            System.out.println("produced with the https:// service URL");
        }
        expect("expired token", pulsarUrl, ca, expired, topic, PulsarClientException.AuthenticationException.class);
        expect("forged token", pulsarUrl, ca, forged, topic, PulsarClientException.AuthenticationException.class);
        expect("role without permission", pulsarUrl, ca, noPerm, topic, PulsarClientException.AuthorizationException.class);
        System.out.println("OK");
    }

    static void expect(String what, String url, String ca, String token, String topic, Class<?> want) throws Exception {
        try (PulsarClient c = client(url, ca, token); Producer<byte[]> p = c.newProducer().topic(topic).create()) {
            throw new AssertionError(what + ": producer created");
        } catch (PulsarClientException e) {
            Throwable t = e;
            while (t != null && !want.isInstance(t)) {
                t = t.getCause();
            }
            if (t == null) {
                throw new AssertionError(what + ": want " + want.getSimpleName() + ", got " + e, e);
            }
            System.out.println(what + " refused: " + t.getClass().getSimpleName() + ": " + t.getMessage());
        }
    }
}

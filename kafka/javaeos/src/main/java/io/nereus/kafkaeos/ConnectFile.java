package io.nereus.kafkaeos;

import java.net.URI;
import java.net.http.*;
import java.nio.file.*;
import java.util.*;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.connect.cli.ConnectDistributed;
import org.apache.kafka.connect.runtime.Connect;

/**
 * Kafka Connect 4.x in distributed mode (one worker, in this JVM) against
 * the broker: it creates its compacted config/offset/status topics, a
 * FileStreamSource connector copies a file into a topic and a
 * FileStreamSink connector copies the topic into another file, through the
 * worker's REST API. The output file must equal the input.
 *
 * Usage: ConnectFile BOOTSTRAP PREFIX WORK_DIR
 */
public final class ConnectFile {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], prefix = args[1];
        Path dir = Paths.get(args[2]);
        Path src = dir.resolve("in.txt"), dst = dir.resolve("out.txt");
        List<String> lines = new ArrayList<>();
        for (int i = 0; i < 500; i++) lines.add("line " + i + " of the file");
        Files.write(src, lines);

        Map<String, String> w = new HashMap<>();
        w.put("bootstrap.servers", bootstrap);
        w.put("group.id", prefix + "-connect");
        w.put("config.storage.topic", prefix + "-configs");
        w.put("offset.storage.topic", prefix + "-offsets");
        w.put("status.storage.topic", prefix + "-status");
        w.put("config.storage.replication.factor", "1");
        w.put("offset.storage.replication.factor", "1");
        w.put("status.storage.replication.factor", "1");
        w.put("key.converter", "org.apache.kafka.connect.storage.StringConverter");
        w.put("value.converter", "org.apache.kafka.connect.storage.StringConverter");
        w.put("offset.flush.interval.ms", "1000");
        w.put("listeners", "http://127.0.0.1:0");
        w.put("plugin.discovery", "only_scan");
        long t0 = System.nanoTime();
        Connect<?> connect = new ConnectDistributed().startConnect(w);
        try {
            URI rest = connect.rest().serverUrl();
            HttpClient http = HttpClient.newHttpClient();
            post(http, rest, "{\"name\":\"" + prefix + "-src\",\"config\":{\"connector.class\":\"org.apache.kafka.connect.file.FileStreamSourceConnector\","
                    + "\"tasks.max\":\"1\",\"file\":\"" + src + "\",\"topic\":\"" + prefix + "-data\"}}");
            post(http, rest, "{\"name\":\"" + prefix + "-sink\",\"config\":{\"connector.class\":\"org.apache.kafka.connect.file.FileStreamSinkConnector\","
                    + "\"tasks.max\":\"1\",\"file\":\"" + dst + "\",\"topics\":\"" + prefix + "-data\"}}");
            long deadline = System.nanoTime() + 180_000_000_000L;
            while (true) {
                List<String> got = Files.exists(dst) ? Files.readAllLines(dst) : List.of();
                if (got.equals(lines)) break;
                if (got.size() > lines.size() || System.nanoTime() > deadline) {
                    throw new IllegalStateException("sink file has " + got.size() + " lines, want " + lines.size()
                            + "; connector status: " + get(http, rest.resolve("/connectors?expand=status")));
                }
                Thread.sleep(200);
            }
            System.out.printf("connect: %d lines copied file -> topic -> file in %.1fs%n", lines.size(), (System.nanoTime() - t0) / 1e9);
            Properties common = new Properties();
            common.put("bootstrap.servers", bootstrap);
            try (Admin admin = Admin.create(common)) {
                for (String t : List.of("-configs", "-offsets", "-status")) {
                    ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, prefix + t);
                    String policy = admin.describeConfigs(List.of(res)).all().get(30, TimeUnit.SECONDS).get(res).get("cleanup.policy").value();
                    if (!"compact".equals(policy)) throw new IllegalStateException(prefix + t + " cleanup.policy=" + policy);
                }
            }
            System.out.println("connect: internal topics are compacted");
        } finally {
            connect.stop();
        }
        System.out.println("OK");
    }

    static void post(HttpClient http, URI rest, String body) throws Exception {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(rest.resolve("/connectors"))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() / 100 != 2) throw new IllegalStateException("POST /connectors: " + r.statusCode() + " " + r.body());
    }

    static String get(HttpClient http, URI u) {
        try {
            return http.send(HttpRequest.newBuilder(u).GET().build(), HttpResponse.BodyHandlers.ofString()).body();
        } catch (Exception e) {
            return e.toString();
        }
    }
}

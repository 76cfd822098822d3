// Prints Key_Shared golden vectors computed by Apache Pulsar's own selector
// classes (pulsar-broker 4.x): for each scenario, the consumer each key is
// assigned to. It lives in Pulsar's package only to reach the test
// constructor Consumer(String, int). Run by pulsar/keyshared/testdata/golden/run.sh;
// its output is checked in as ../golden.txt and read by the Go tests.
package org.apache.pulsar.broker.service;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.lang.reflect.Field;
import java.lang.reflect.Proxy;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

public class NereusKeySharedGolden {
    public static void main(String[] args) throws Exception {
        List<String> keys = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            keys.add("key-" + i);
        }
        keys.add("a");
        keys.add("b");
        keys.add("c");
        keys.add("NONE_KEY");
        keys.add("");
        String[][] scenarios = {
            {"c1", "c2"},
            {"c1", "c2", "c3"},
            {"consumer-a", "consumer-b", "consumer-c", "consumer-d", "consumer-e"},
            {"same", "same", "other"},
        };
        for (String[] names : scenarios) {
            ConsistentHashingStickyKeyConsumerSelector sel = new ConsistentHashingStickyKeyConsumerSelector(100);
            Map<Consumer, String> label = new IdentityHashMap<>();
            List<Consumer> cs = new ArrayList<>();
            for (int i = 0; i < names.length; i++) {
                Consumer c = consumer(names[i]);
                label.put(c, names[i] + "#" + i);
                cs.add(c);
                sel.addConsumer(c).get();
            }
            print(String.join(",", names), sel, label, keys);
            // The first consumer leaves: its keys move, the others stay.
            sel.removeConsumer(cs.get(0));
            print(String.join(",", names) + " -" + names[0] + "#0", sel, label, keys);
        }
    }

    // The test constructor leaves the connection null, but Consumer.hashCode
    // (used by the selector's name-index tracker) reads it: give each
    // consumer an inert connection whose identity is its hash.
    static Consumer consumer(String name) throws Exception {
        Consumer c = new Consumer(name, 1000);
        Object cnx = Proxy.newProxyInstance(TransportCnx.class.getClassLoader(), new Class<?>[] {TransportCnx.class},
                (proxy, m, a) -> switch (m.getName()) {
                    case "hashCode" -> System.identityHashCode(proxy);
                    case "equals" -> proxy == a[0];
                    case "toString" -> "cnx-" + name;
                    default -> null;
                });
        Field f = Consumer.class.getDeclaredField("cnx");
        f.setAccessible(true);
        f.set(c, cnx);
        return c;
    }

    static void print(String scenario, ConsistentHashingStickyKeyConsumerSelector sel, Map<Consumer, String> label,
                      List<String> keys) {
        for (String k : keys) {
            byte[] kb = k.getBytes(StandardCharsets.UTF_8);
            int hash = sel.makeStickyKeyHash(kb);
            System.out.println(scenario + "\t" + k + "\t" + hash + "\t" + label.get(sel.select(kb)));
        }
    }
}

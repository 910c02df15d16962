// ClusterProducer drives Apache Kafka's Java producer (kafka-clients: idempotent, acks=all,
// 5 in flight, retries until delivery.timeout.ms) open loop at a fixed record rate across every
// partition of a topic (record n keyed "n"), and reports what its client saw: one line
//
//   sent=N acked=N failed=N errors=Class:count,...
//
// on stdout, and every acknowledged record's value, one per line, into a file, so the test can
// tell records lost (acknowledged, not stored) from duplicated (stored twice).
//
// Usage: ClusterProducer bootstrap topic clientId recordsPerSecond seconds ackedFile
// (PROBE_PROPS in the environment: more client properties, key=value per line)
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public final class ClusterProducer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], clientId = args[2];
        double rate = Double.parseDouble(args[3]);
        double seconds = Double.parseDouble(args[4]);
        String ackedFile = args[5];
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        // Small batches (about 18 records): the gateway decides a request whole, so the batches
        // a fault piles up are what its admitted rate moves by (see verify_test.go oneRequest).
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "1024");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        String extra = System.getenv("PROBE_PROPS");
        if (extra != null) {
            for (String line : extra.split("\n")) {
                int eq = line.indexOf('=');
                if (eq > 0) {
                    p.put(line.substring(0, eq).trim(), line.substring(eq + 1).trim());
                }
            }
        }
        AtomicLong failed = new AtomicLong();
        ConcurrentLinkedQueue<String> acked = new ConcurrentLinkedQueue<>();
        Map<String, Integer> errors = new TreeMap<>();
        long total = (long) (rate * seconds);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            // The schedule starts once the client has its metadata (see e2e's ProducerProbe).
            producer.partitionsFor(topic);
            System.err.println("ClusterProducer: started");
            long start = System.nanoTime();
            for (long n = 0; n < total; n++) {
                long due = start + (long) (n * 1e9 / rate);
                long wait = due - System.nanoTime();
                if (wait > 0) {
                    Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                }
                String value = clientId + "-" + n;
                producer.send(new ProducerRecord<>(topic, Long.toString(n), value), (md, e) -> {
                    if (e == null) {
                        acked.add(value);
                    } else {
                        failed.incrementAndGet();
                        synchronized (errors) {
                            errors.merge(e.getClass().getSimpleName(), 1, Integer::sum);
                        }
                    }
                });
            }
            producer.flush();
        }
        try (PrintWriter w = new PrintWriter(ackedFile, StandardCharsets.UTF_8)) {
            for (String v : acked) {
                w.println(v);
            }
        }
        StringBuilder errs = new StringBuilder();
        synchronized (errors) {
            errors.forEach((k, v) -> errs.append(errs.length() > 0 ? "," : "").append(k).append(':').append(v));
        }
        System.out.printf("sent=%d acked=%d failed=%d errors=%s%n", total, acked.size(), failed.get(), errs);
    }
}

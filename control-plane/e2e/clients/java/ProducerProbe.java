// ProducerProbe drives Apache Kafka's own Java producer (kafka-clients, as users run it:
// idempotent, 5 in flight, retries until delivery.timeout.ms) open loop at a fixed record rate
// for a while, and prints one line of outcomes for the e2e conformance tests to parse:
//
//   sent=N acked=N failed=N errors=Class:count,... first_ack_ms=N last_ack_ms=N
//
// Usage: ProducerProbe bootstrap topic clientId recordsPerSecond seconds recordBytes
// (PROBE_PROPS in the environment: more client properties, key=value per line)
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class ProducerProbe {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], clientId = args[2];
        double rate = Double.parseDouble(args[3]);
        double seconds = Double.parseDouble(args[4]);
        int size = Integer.parseInt(args[5]);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        // PROBE_PROPS: more client properties, one key=value per line (security settings).
        String extra = System.getenv("PROBE_PROPS");
        if (extra != null) {
            for (String line : extra.split("\n")) {
                int eq = line.indexOf('=');
                if (eq > 0) {
                    p.put(line.substring(0, eq).trim(), line.substring(eq + 1).trim());
                }
            }
        }
        AtomicLong acked = new AtomicLong(), failed = new AtomicLong();
        AtomicLong firstAck = new AtomicLong(-1), lastAck = new AtomicLong(-1);
        Map<String, Integer> errors = new TreeMap<>();
        long total = (long) (rate * seconds);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            // The schedule starts once the client has its metadata: a schedule that starts while
            // the client cannot send yet (class loading, the first metadata, SASL) offers its
            // backlog at once, over a tenant's burst.
            producer.partitionsFor(topic);
            long start = System.nanoTime();
            for (long n = 0; n < total; n++) {
                // Open loop: each record at its planned time, whatever the producer did before.
                long due = start + (long) (n * 1e9 / rate);
                long wait = due - System.nanoTime();
                if (wait > 0) {
                    Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                }
                byte[] value = new byte[size];
                byte[] id = (clientId + "-" + n).getBytes();
                System.arraycopy(id, 0, value, 0, Math.min(id.length, size));
                producer.send(new ProducerRecord<>(topic, 0, null, value), (md, e) -> {
                    long at = (System.nanoTime() - start) / 1_000_000;
                    if (e == null) {
                        acked.incrementAndGet();
                        firstAck.compareAndSet(-1, at);
                        lastAck.set(at);
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
        StringBuilder errs = new StringBuilder();
        synchronized (errors) {
            errors.forEach((k, v) -> errs.append(errs.length() > 0 ? "," : "").append(k).append(':').append(v));
        }
        System.out.printf("sent=%d acked=%d failed=%d errors=%s first_ack_ms=%d last_ack_ms=%d%n",
                total, acked.get(), failed.get(), errs, firstAck.get(), lastAck.get());
    }
}

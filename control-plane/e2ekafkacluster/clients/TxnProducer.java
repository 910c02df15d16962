// TxnProducer drives Apache Kafka's Java transactional producer (kafka-clients: a
// transactional.id, so idempotent, acks=all) open loop at a fixed record rate across every
// partition of a topic, ten records to a transaction; every fifth transaction is aborted. It
// reports what its client saw: one line
//
//   sent=N acked=N failed=N errors=Class:count,...
//
// on stdout (acked: records of committed transactions; failed: records of transactions that
// failed to commit, not counting the deliberate aborts), every committed record's value into
// ackedFile and every aborted one's into ackedFile + ".aborted".
//
// Usage: TxnProducer bootstrap topic clientId recordsPerSecond seconds ackedFile
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.serialization.StringSerializer;

public final class TxnProducer {
    static final int PER_TRANSACTION = 10;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], clientId = args[2];
        double rate = Double.parseDouble(args[3]);
        double seconds = Double.parseDouble(args[4]);
        String ackedFile = args[5];
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, clientId);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "1024");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        List<String> committed = new ArrayList<>(), aborted = new ArrayList<>();
        Map<String, Integer> errors = new TreeMap<>();
        long total = (long) (rate * seconds), failed = 0;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            producer.partitionsFor(topic);
            System.err.println("TxnProducer: started");
            long start = System.nanoTime();
            for (long n = 0, txn = 0; n < total; txn++) {
                List<String> values = new ArrayList<>();
                producer.beginTransaction();
                try {
                    for (int i = 0; i < PER_TRANSACTION && n < total; i++, n++) {
                        long wait = start + (long) (n * 1e9 / rate) - System.nanoTime();
                        if (wait > 0) {
                            Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                        }
                        String value = clientId + "-" + n;
                        values.add(value);
                        producer.send(new ProducerRecord<>(topic, Long.toString(n), value));
                    }
                    if (txn % 5 == 4) {
                        producer.abortTransaction();
                        aborted.addAll(values);
                    } else {
                        producer.commitTransaction();
                        committed.addAll(values);
                    }
                } catch (KafkaException e) {
                    errors.merge(e.getClass().getSimpleName(), 1, Integer::sum);
                    failed += values.size();
                    try {
                        producer.abortTransaction();
                    } catch (KafkaException again) {
                        errors.merge("abort:" + again.getClass().getSimpleName(), 1, Integer::sum);
                    }
                    aborted.addAll(values);
                }
            }
        }
        try (PrintWriter w = new PrintWriter(ackedFile, StandardCharsets.UTF_8)) {
            committed.forEach(w::println);
        }
        try (PrintWriter w = new PrintWriter(ackedFile + ".aborted", StandardCharsets.UTF_8)) {
            aborted.forEach(w::println);
        }
        StringBuilder errs = new StringBuilder();
        errors.forEach((k, v) -> errs.append(errs.length() > 0 ? "," : "").append(k).append(':').append(v));
        System.out.printf("sent=%d acked=%d failed=%d errors=%s%n", total - aborted.size() + failed, committed.size(), failed, errs);
    }
}

// ConsumerProbe drives Apache Kafka's own Java consumer (kafka-clients, as users run it: a
// consumer-group member that subscribes, polls and commits automatically) reading a topic from
// its start, until it has N records, none came for idleSeconds after the first, or the deadline
// passes, and prints one JSON object for the e2e read-side tests to parse:
//
//   {"records": [[seconds since the epoch received, partition, offset, key + value bytes], ...],
//    "revoked": [seconds since the epoch of each revocation or loss, ...]}
//
// (closing revokes the assignment itself: that one is not listed).
//
// Usage: ConsumerProbe bootstrap topic group clientId records idleSeconds deadlineSeconds
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class ConsumerProbe {
    public static void main(String[] args) {
        String bootstrap = args[0], topic = args[1], group = args[2], clientId = args[3];
        int want = Integer.parseInt(args[4]);
        long idle = (long) (Double.parseDouble(args[5]) * 1000);
        long deadline = System.currentTimeMillis() + (long) (Double.parseDouble(args[6]) * 1000);
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        StringBuilder out = new StringBuilder("{\"records\": [");
        StringBuilder revoked = new StringBuilder();
        int got = 0;
        long last = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}

                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    if (!partitions.isEmpty()) {
                        lost();
                    }
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    lost();
                }

                private void lost() {
                    revoked.append(revoked.length() > 0 ? "," : "")
                            .append(String.format(Locale.ROOT, "%.6f", System.currentTimeMillis() / 1000.0));
                }
            });
            while (got < want && System.currentTimeMillis() < deadline
                    && (last == 0 || System.currentTimeMillis() - last < idle)) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    int size = (r.key() == null ? 0 : r.key().length) + (r.value() == null ? 0 : r.value().length);
                    last = System.currentTimeMillis();
                    out.append(got++ > 0 ? "," : "").append(String.format(Locale.ROOT, "[%.6f,%d,%d,%d]",
                            last / 1000.0, r.partition(), r.offset(), size));
                }
            }
            out.append("], \"revoked\": [").append(revoked).append("]}");
        }
        System.out.println(out);
    }
}

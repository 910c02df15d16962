// ClusterConsumer is one member of a consumer group of Apache Kafka's Java consumer
// (kafka-clients: the classic group protocol, cooperative-sticky assignment, offsets committed
// automatically as it goes) reading a topic from its start. It writes every record it is given,
// in the order given, as "partition offset value" lines into a file, and stops once a file
// named like it with ".stop" appears; then it prints one line
//
//   rebalances=N
//
// on stdout: the assignments after its first, and the partitions it had revoked or lost.
//
// Usage: ClusterConsumer bootstrap topic group clientId readFile
import java.io.BufferedWriter;
import java.io.FileWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public final class ClusterConsumer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], clientId = args[3];
        Path readFile = Path.of(args[4]);
        Path stopFile = Path.of(args[4] + ".stop");
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        AtomicInteger assignments = new AtomicInteger();
        AtomicInteger rebalances = new AtomicInteger();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p);
                BufferedWriter out = new BufferedWriter(new FileWriter(readFile.toFile()))) {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    if (assignments.incrementAndGet() > 1 && !partitions.isEmpty()) {
                        rebalances.incrementAndGet();
                    }
                }

                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    if (!partitions.isEmpty()) {
                        rebalances.incrementAndGet();
                    }
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    if (!partitions.isEmpty()) {
                        rebalances.incrementAndGet();
                    }
                }
            });
            System.err.println("ClusterConsumer: started");
            while (!Files.exists(stopFile)) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    out.write(r.partition() + " " + r.offset() + " " + r.value());
                    out.newLine();
                }
                out.flush();
            }
        }
        System.out.println("rebalances=" + rebalances.get());
    }
}

// AuthzProbe runs Apache Kafka's own Java clients (producer, consumer, transactional producer,
// Admin) as one tenant through the gateway, one operation per argument, and prints a line per
// operation with what the client raised, for the e2e authorization tests to parse:
//
//   op=<operation> outcome=<ok | none | the exception's class> [detail=...]
//
// Operations: produce:T, consume:T:GROUP (subscribe, poll until a record), txn:ID:T (a
// transaction of one record), list (Admin listTopics), describe:T, create:T, delete:T,
// config:T (Admin incrementalAlterConfigs), quota (Admin alterClientQuotas of the default
// client), quotas (Admin describeClientQuotas: every entity the caller is shown, as
// detail=entity{key=value}|...). list's detail is the topics, comma-separated.
//
// Usage: AuthzProbe bootstrap clientId operation...
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class AuthzProbe {
    public static void main(String[] args) {
        String bootstrap = args[0], clientId = args[1];
        for (int i = 2; i < args.length; i++) {
            String op = args[i];
            String outcome, extra = "";
            try {
                extra = run(bootstrap, clientId, op.split(":"));
                outcome = extra.equals("none") ? "none" : "ok";
            } catch (Throwable e) {
                outcome = cause(e).getClass().getSimpleName();
            }
            System.out.println("op=" + op + " outcome=" + outcome + (extra.startsWith("detail=") ? " " + extra : ""));
            System.out.flush();
        }
    }

    /** The error the client reports, out of the wrappers of futures and of the producer. */
    static Throwable cause(Throwable e) {
        while (e.getCause() != null
                && (e instanceof ExecutionException || e instanceof CompletionException
                        || (e instanceof KafkaException && !(e instanceof ApiException)))) {
            e = e.getCause();
        }
        return e;
    }

    static Properties common(String bootstrap, String clientId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", clientId);
        return p;
    }

    static String run(String bootstrap, String clientId, String[] op) throws Exception {
        Properties p = common(bootstrap, clientId);
        switch (op[0]) {
            case "produce":
            case "txn": {
                p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
                p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
                p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
                p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "20000");
                p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
                boolean txn = op[0].equals("txn");
                if (txn) {
                    p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, op[1]);
                }
                String topic = txn ? op[2] : op[1];
                try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                    if (txn) {
                        producer.initTransactions();
                        producer.beginTransaction();
                    }
                    producer.send(new ProducerRecord<>(topic, 0, null, "authz".getBytes())).get(30, TimeUnit.SECONDS);
                    if (txn) {
                        producer.commitTransaction();
                    }
                }
                return "";
            }
            case "consume": {
                p.put(ConsumerConfig.GROUP_ID_CONFIG, op[2]);
                p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
                p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
                p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
                try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
                    consumer.subscribe(List.of(op[1]));
                    long deadline = System.currentTimeMillis() + 30_000;
                    while (System.currentTimeMillis() < deadline) {
                        if (!consumer.poll(Duration.ofMillis(500)).isEmpty()) {
                            return "";
                        }
                    }
                }
                return "none";
            }
            default:
                break;
        }
        p.put("default.api.timeout.ms", "20000");
        p.put("request.timeout.ms", "10000");
        try (Admin admin = Admin.create(p)) {
            switch (op[0]) {
                case "list":
                    return "detail=" + String.join(",", new TreeSet<>(admin.listTopics().names().get()));
                case "describe":
                    admin.describeTopics(List.of(op[1])).allTopicNames().get();
                    return "";
                case "create":
                    admin.createTopics(List.of(new NewTopic(op[1], 1, (short) 1))).all().get();
                    return "";
                case "delete":
                    admin.deleteTopics(List.of(op[1])).all().get();
                    return "";
                case "config": {
                    ConfigResource topic = new ConfigResource(ConfigResource.Type.TOPIC, op[1]);
                    AlterConfigOp set = new AlterConfigOp(new ConfigEntry("retention.ms", "3600000"), AlterConfigOp.OpType.SET);
                    admin.incrementalAlterConfigs(Map.of(topic, List.of(set))).all().get();
                    return "";
                }
                case "quotas": {
                    // Every entity the caller is shown, as entity{key=value,...} joined by '|'.
                    StringBuilder out = new StringBuilder("detail=");
                    Map<ClientQuotaEntity, Map<String, Double>> all = admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get();
                    for (Map.Entry<ClientQuotaEntity, Map<String, Double>> e : all.entrySet()) {
                        out.append(out.length() > 7 ? "|" : "").append(e.getKey().entries()).append(new java.util.TreeMap<>(e.getValue()));
                    }
                    return out.toString().replace(" ", "");
                }
                case "quota": {
                    ClientQuotaEntity everyone = new ClientQuotaEntity(java.util.Collections.singletonMap(ClientQuotaEntity.CLIENT_ID, null));
                    ClientQuotaAlteration.Op one = new ClientQuotaAlteration.Op("producer_byte_rate", 1.0);
                    admin.alterClientQuotas(List.of(new ClientQuotaAlteration(everyone, List.of(one)))).all().get();
                    return "";
                }
                default:
                    throw new IllegalArgumentException("unknown operation " + op[0]);
            }
        }
    }
}

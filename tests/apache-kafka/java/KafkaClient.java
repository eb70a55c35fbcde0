// A small Kafka Java client for the test suite, compiled at test time against Kafka 4.1's jars.
//
//   KafkaClient init-idempotent BOOTSTRAP                 -> "producer <id> <epoch>"
//   KafkaClient init-transactional BOOTSTRAP TXN_ID       -> "producer <id> <epoch>"
//   KafkaClient produce BOOTSTRAP TOPIC COUNT [TXN_ID commit|abort]
//       idempotent (acks=all) or transactional; one "acked <partition> <offset> <value>" line per
//       acknowledged record, then "producer <id> <epoch>"
//   KafkaClient consume BOOTSTRAP TOPIC EXPECTED TIMEOUT_MS [GROUP]
//       read_committed from the beginning; one "record <partition> <offset> <value>" line each,
//       then "consumed <n>"; with GROUP, offsets are committed.
//
// Errors go to stderr and exit 1, so the caller sees Kafka's own exception text.
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class KafkaClient {
    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "init-idempotent" -> initIdempotent(args[1]);
            case "init-transactional" -> initTransactional(args[1], args[2]);
            case "produce" -> produce(args[1], args[2], Integer.parseInt(args[3]),
                    args.length > 4 ? args[4] : null, args.length > 5 ? args[5] : "commit");
            case "consume" -> consume(args[1], args[2], Integer.parseInt(args[3]),
                    Long.parseLong(args[4]), args.length > 5 ? args[5] : null);
            default -> throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    private static Properties producerProps(String bootstrap) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        return p;
    }

    // The producer's id and epoch as its TransactionManager holds them (no public accessor).
    private static long[] producerIdAndEpoch(KafkaProducer<?, ?> producer) throws Exception {
        Field f = KafkaProducer.class.getDeclaredField("transactionManager");
        f.setAccessible(true);
        Object tm = f.get(producer);
        Method m = tm.getClass().getDeclaredMethod("producerIdAndEpoch");
        m.setAccessible(true);
        Object pe = m.invoke(tm);
        long id = pe.getClass().getField("producerId").getLong(pe);
        short epoch = pe.getClass().getField("epoch").getShort(pe);
        return new long[] {id, epoch};
    }

    private static void printProducer(KafkaProducer<?, ?> producer) throws Exception {
        long[] pe = producerIdAndEpoch(producer);
        System.out.println("producer " + pe[0] + " " + pe[1]);
    }

    private static void initIdempotent(String bootstrap) throws Exception {
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(bootstrap))) {
            long deadline = System.currentTimeMillis() + 30000;
            while (producerIdAndEpoch(producer)[0] < 0) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("no producer id within 30 s");
                }
                Thread.sleep(20);
            }
            printProducer(producer);
        }
    }

    private static void initTransactional(String bootstrap, String txnId) throws Exception {
        Properties p = producerProps(bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            printProducer(producer);
        }
    }

    private static void produce(String bootstrap, String topic, int count, String txnId,
                                String outcome) throws Exception {
        Properties p = producerProps(bootstrap);
        if (txnId != null) {
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        }
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            if (txnId != null) {
                producer.initTransactions();
                producer.beginTransaction();
            }
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            List<String> values = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                String value = (txnId == null ? "idem-" : txnId + "-") + i;
                values.add(value);
                acks.add(producer.send(new ProducerRecord<>(topic, Integer.toString(i), value)));
            }
            if (txnId != null) {
                if (outcome.equals("abort")) {
                    producer.flush();
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                }
            }
            for (int i = 0; i < count; i++) {
                RecordMetadata md = acks.get(i).get();
                System.out.println("acked " + md.partition() + " " + md.offset() + " " + values.get(i));
            }
            printProducer(producer);
        }
    }

    private static void consume(String bootstrap, String topic, int expected, long timeoutMs,
                                String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        int n = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            if (group != null) {
                consumer.subscribe(List.of(topic));
            } else {
                List<org.apache.kafka.common.TopicPartition> parts = new ArrayList<>();
                consumer.partitionsFor(topic).forEach(
                        info -> parts.add(new org.apache.kafka.common.TopicPartition(topic, info.partition())));
                consumer.assign(parts);
                consumer.seekToBeginning(parts);
            }
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (n < expected && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    System.out.println("record " + r.partition() + " " + r.offset() + " " + r.value());
                    n++;
                }
            }
            if (group != null) {
                consumer.commitSync();
            }
        }
        System.out.println("consumed " + n);
    }
}

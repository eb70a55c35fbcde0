// kafkajs against a real Kafka broker: produces idempotently, then in one transaction it
// aborts and one it commits, then reads the topic back read_committed in a consumer group
// and commits the group's offsets. Prints one JSON object: the producer ids and epochs kafkajs
// initialised, every record the consumer got and the offsets it committed.
// Usage: node through_broker.js HOST:PORT TOPIC PARTITIONS GROUP TRANSACTIONAL_ID COUNT
const { Kafka, logLevel } = require("kafkajs");

const [bootstrap, topic, partitionsArg, groupId, transactionalId, countArg] =
  process.argv.slice(2);
const partitions = Number(partitionsArg);
const count = Number(countArg);
const producerIds = [];
const logCreator = () => ({ log }) => {
  if (log.message === "Initialized producer id & epoch") {
    producerIds.push({ producerId: Number(log.producerId), producerEpoch: log.producerEpoch });
  }
};

// COUNT records per phase, spread over every partition so that each partition holds, in
// order, idempotent records, an aborted transaction's and a committed transaction's.
const records = (prefix) =>
  Array.from({ length: count }, (_, i) => ({ value: `${prefix}-${i}`, partition: i % partitions }));

async function main() {
  const kafka = new Kafka({
    clientId: "kraftpy-kafkajs",
    brokers: [bootstrap],
    logLevel: logLevel.DEBUG,
    logCreator,
    retry: { retries: 8 },
  });

  const idempotent = kafka.producer({ idempotent: true });
  await idempotent.connect();
  await idempotent.send({ topic, acks: -1, messages: records("kafkajs-idempotent") });
  await idempotent.disconnect();

  const transactional = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 });
  await transactional.connect();
  const aborted = await transactional.transaction();
  await aborted.send({ topic, acks: -1, messages: records("kafkajs-aborted") });
  await aborted.abort();
  const committed = await transactional.transaction();
  await committed.send({ topic, acks: -1, messages: records("kafkajs-committed") });
  await committed.commit();
  await transactional.disconnect();

  const consumed = [];
  const last = new Map();
  const consumer = kafka.consumer({ groupId, readUncommitted: false, retry: { retries: 8 } });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let finish;
  const done = new Promise((resolve) => { finish = resolve; });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      consumed.push({ partition, offset: Number(message.offset), value: message.value.toString() });
      last.set(partition, Number(message.offset));
      if (consumed.length >= 2 * count) finish();
    },
  });
  const timer = setTimeout(finish, 60000);
  await done;
  clearTimeout(timer);
  // A moment more, so that a record that should not be there would still show up.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const offsets = [...last].map(([partition, offset]) =>
    ({ topic, partition, offset: String(offset + 1) }));
  await consumer.commitOffsets(offsets);
  await consumer.disconnect();
  const committedOffsets = offsets.map(({ partition, offset }) => ({ partition, offset: Number(offset) }));
  console.log(JSON.stringify({ producerIds, consumed, committed: committedOffsets }));
}

main().catch((err) => {
  console.error(`${err.name}: ${err.message}`);
  process.exit(1);
});

// Connects a kafkajs producer to a kraftpy bootstrap address and prints, as one JSON line per
// initialisation, the producer id and epoch kafkajs reports in its DEBUG log.
// Usage: node init_producer_id.js HOST:PORT [TRANSACTIONAL_ID]
const { Kafka, logLevel } = require("kafkajs");

const [bootstrap, transactionalId] = process.argv.slice(2);
const seen = [];
const logCreator = () => ({ log }) => {
  if (log.message === "Initialized producer id & epoch") {
    seen.push({ producerId: Number(log.producerId), producerEpoch: log.producerEpoch });
  }
};

async function main() {
  const kafka = new Kafka({
    clientId: "kraftpy-kafkajs",
    brokers: [bootstrap],
    logLevel: logLevel.DEBUG,
    logCreator,
    retry: { retries: 5 },
  });
  const options = transactionalId
    ? { transactionalId, idempotent: true, maxInFlightRequests: 1 }
    : { idempotent: true };
  const producer = kafka.producer(options);
  await producer.connect();
  if (transactionalId) {
    const txn = await producer.transaction(); // the transactional InitProducerId
    await txn.abort(); // nothing was sent, so no EndTxn goes out
  }
  await producer.disconnect();
  for (const s of seen) console.log(JSON.stringify(s));
}

main().catch((err) => {
  console.error(`${err.name}: ${err.message}`);
  process.exit(1);
});

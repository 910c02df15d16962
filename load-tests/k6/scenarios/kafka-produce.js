// Kafka produce through the gateway at a fixed arrival rate; each iteration waits for its
// record's acknowledgement (acks=all by default).
//
//   k6 run -e RATE=1000 -e DURATION=30s load-tests/k6/scenarios/kafka-produce.js
//
// Adapt: RATE, DURATION, SIZE, KAFKA_BROKERS (comma separated), CLIENT_ID (its prefix selects
// the tenant, e.g. acme-), ACKS (1 or all), TOPIC, P99_MS / P999_MS.
import ws from 'k6/x/weighstation';
import { check } from 'k6';

const env = (name, def) => __ENV[name] || def;
const rate = Number(env('RATE', 1000));

export const options = {
  scenarios: {
    produce: {
      executor: 'constant-arrival-rate',
      rate: rate,
      timeUnit: '1s',
      duration: env('DURATION', '30s'),
      preAllocatedVUs: Number(env('VUS', Math.max(20, Math.ceil(rate / 10)))),
      maxVUs: Number(env('MAX_VUS', Math.max(100, Math.ceil(rate / 2)))),
    },
  },
  thresholds: {
    'weighstation_duration{op:kafka_produce}': [`p(99)<${env('P99_MS', 50)}`, `p(99.9)<${env('P999_MS', 200)}`],
    'weighstation_ok{op:kafka_produce}': ['rate>0.999'],
    dropped_iterations: ['count==0'],
  },
  summaryTrendStats: ['min', 'med', 'p(90)', 'p(99)', 'p(99.9)', 'p(99.99)', 'max'],
};

const kafka = ws.kafka({
  brokers: env('KAFKA_BROKERS', '127.0.0.1:9092').split(','),
  clientId: env('CLIENT_ID', 'acme-k6'),
  acks: env('ACKS', 'all'),
});
const topic = env('TOPIC', 'k6-produce');
const value = 'x'.repeat(Number(env('SIZE', 128)));

// The first record to a new topic waits for Kafka to create it and elect a leader (hundreds
// of milliseconds): send it before the measured scenario starts.
export function setup() {
  const r = kafka.produce(topic, 'warm-up');
  if (!r.ok) throw new Error(`producing to ${topic}: ${r.error}`);
}

export default function () {
  const r = kafka.produce(topic, value);
  check(r, { 'acknowledged': (r) => r.ok });
}

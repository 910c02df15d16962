// NATS publish through the gateway at a fixed arrival rate. Each iteration publishes one
// message and waits until the server has processed it (a PING/PONG behind it), so delays the
// gateway adds — including backpressure when a tenant is over its rate — are in the duration.
//
//   k6 run -e RATE=1000 -e DURATION=30s load-tests/k6/scenarios/nats-publish.js
//
// Adapt: RATE, DURATION, SIZE (bytes), NATS_URL, NATS_USER/NATS_PASSWORD (the tenant), SUBJECT,
// and the SLO thresholds P99_MS / P999_MS.
import ws from 'k6/x/weighstation';
import { check } from 'k6';

const env = (name, def) => __ENV[name] || def;
const rate = Number(env('RATE', 1000));

export const options = {
  scenarios: {
    publish: {
      executor: 'constant-arrival-rate',
      rate: rate,
      timeUnit: '1s',
      duration: env('DURATION', '30s'),
      // Enough VUs that one is always free when an iteration is due: VUs ≥ rate × the slowest
      // latency you accept. When none is free k6 drops the iteration and counts it.
      preAllocatedVUs: Number(env('VUS', Math.max(10, Math.ceil(rate / 20)))),
      maxVUs: Number(env('MAX_VUS', Math.max(50, Math.ceil(rate / 5)))),
    },
  },
  thresholds: {
    'weighstation_duration{op:nats_publish}': [`p(99)<${env('P99_MS', 10)}`, `p(99.9)<${env('P999_MS', 50)}`],
    'weighstation_ok{op:nats_publish}': ['rate>0.999'],
    // A dropped iteration is a send that did not happen on time: the latency figures above
    // would then omit exactly the slow moments.
    dropped_iterations: ['count==0'],
  },
  summaryTrendStats: ['min', 'med', 'p(90)', 'p(99)', 'p(99.9)', 'p(99.99)', 'max'],
};

const nats = ws.nats({
  url: env('NATS_URL', 'nats://127.0.0.1:4222'),
  user: env('NATS_USER', 'acme'),
  password: env('NATS_PASSWORD', 'acme-secret'),
  connections: Number(env('CONNECTIONS', 4)),
});
const subject = env('SUBJECT', 'k6.publish');
const payload = 'x'.repeat(Number(env('SIZE', 128)));

export default function () {
  const r = nats.publish(subject, payload);
  check(r, { 'published': (r) => r.ok });
}

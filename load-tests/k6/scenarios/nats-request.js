// NATS request/reply through the gateway at a fixed arrival rate, answered by an echoing
// responder the extension runs on the same connections (nothing else needs to be started).
//
//   k6 run -e RATE=2000 -e DURATION=30s load-tests/k6/scenarios/nats-request.js
//
// Adapt: RATE, DURATION, SIZE, NATS_URL, NATS_USER/NATS_PASSWORD (the tenant), SUBJECT (set
// SERVE=0 to call your own service instead of the built-in echo), P99_MS / P999_MS.
import ws from 'k6/x/weighstation';
import { check } from 'k6';

const env = (name, def) => __ENV[name] || def;
const rate = Number(env('RATE', 1000));

export const options = {
  scenarios: {
    request: {
      executor: 'constant-arrival-rate',
      rate: rate,
      timeUnit: '1s',
      duration: env('DURATION', '30s'),
      preAllocatedVUs: Number(env('VUS', Math.max(10, Math.ceil(rate / 20)))),
      maxVUs: Number(env('MAX_VUS', Math.max(50, Math.ceil(rate / 5)))),
    },
  },
  thresholds: {
    'weighstation_duration{op:nats_request}': [`p(99)<${env('P99_MS', 10)}`, `p(99.9)<${env('P999_MS', 50)}`],
    'weighstation_ok{op:nats_request}': ['rate>0.999'],
    dropped_iterations: ['count==0'],
  },
  summaryTrendStats: ['min', 'med', 'p(90)', 'p(99)', 'p(99.9)', 'p(99.99)', 'max'],
};

const nats = ws.nats({
  url: env('NATS_URL', 'nats://127.0.0.1:4222'),
  user: env('NATS_USER', 'acme'),
  password: env('NATS_PASSWORD', 'acme-secret'),
  connections: Number(env('CONNECTIONS', 4)),
  timeout: env('TIMEOUT', '5s'),
});
const subject = env('SUBJECT', 'k6.echo');
const payload = 'x'.repeat(Number(env('SIZE', 128)));

// The responder lives in the shared connection pool, so starting it once (in setup) serves
// every VU.
export function setup() {
  if (env('SERVE', '1') === '1') nats.serve(subject);
}

export default function () {
  const r = nats.request(subject, payload);
  check(r, { 'answered': (r) => r.ok });
}

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Prometheus metrics of one control-plane process. Each app owns its registry, so tests can run several
 * gateways in one process. Aggregate only: no account, key or request ids in labels.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly httpRequests = new Counter({
    name: 'svc_http_requests_total',
    help: 'HTTP requests answered, by method, route template and status class',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: 'svc_http_request_duration_seconds',
    help: 'HTTP request duration in seconds, by route template',
    labelNames: ['method', 'route'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly leader = new Gauge({
    name: 'sable_leader',
    help: '1 while this process holds the leader lock and runs the background loops, else 0',
    registers: [this.registry],
  });
  readonly jobRuns = new Counter({
    name: 'svc_job_runs_total',
    help: 'Background loop iterations, by job and outcome',
    labelNames: ['job', 'outcome'] as const,
    registers: [this.registry],
  });

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    this.leader.set(0);
    if (opts.defaultMetrics !== false) {
      collectDefaultMetrics({ register: this.registry, prefix: 'svc_process_' });
      // These gauges carry a _total suffix that Prometheus reserves for counters; promtool rejects them.
      for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) {
        this.registry.removeSingleMetric(`svc_process_${name}`);
      }
    }
  }

  async exposition(): Promise<string> {
    return this.registry.metrics();
  }
}

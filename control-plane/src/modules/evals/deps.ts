import type { Kysely } from 'kysely';
import type { Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { Processes } from '../../http/idempotency.ts';
import type { StepFault } from '../../jobs/faults.ts';
import type { Mode } from '../guardrails/scanner.ts';
import type { InferenceService } from '../inference/service.ts';
import type { KeysService } from '../keys/service.ts';
import type { EventEmitter } from '../webhooks/service.ts';
import { MonitorsService } from './monitors.ts';
import { EvalsService } from './service.ts';

export interface Evals {
  evals: EvalsService;
  monitors: MonitorsService;
}

/** Wires eval suites and drift monitors: case calls go through the metered inference service; drift events through the webhook outbox. */
export function createEvals(d: {
  db: Kysely<DB>;
  clock: Clock;
  keys: KeysService;
  inference: InferenceService;
  publicUrl: URL;
  guardrailsMode: Mode;
  events: EventEmitter;
  processes: Processes;
  log: { warn(obj: object, msg: string): void };
  stepFault?: StepFault | undefined;
}): Evals {
  const evals = new EvalsService({ db: d.db, clock: d.clock, keys: d.keys, calls: { inference: d.inference, clock: d.clock, publicUrl: d.publicUrl, guardrailsMode: d.guardrailsMode } });
  return { evals, monitors: new MonitorsService({ db: d.db, clock: d.clock, evals, events: d.events, processes: d.processes, log: d.log, stepFault: d.stepFault }) };
}

import type { Kysely } from 'kysely';
import { Sealer, ServiceError, canonicalize, invalid, newId, notFound, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import { chatUnderKey, type ModelAnswer, type ModelCallDeps } from '../evals/model-call.ts';
import { inferenceKeyOf } from '../keys/inference-key.ts';
import type { KeysService } from '../keys/service.ts';
import { outputFingerprint, requestFingerprint } from './fingerprint.ts';
import { CAPSULES_CAP, REPLAYS_KEPT, type RecordInput } from './schemas.ts';
import { countCapsules, destroyRequest, insertCapsule, insertRun, listCapsules, listRuns, lockCapsules, ownedCapsule, type CapsuleRow, type RunRow } from './store.ts';

export interface ReplayDeps {
  db: Kysely<DB>;
  clock: Clock;
  sealKey: Uint8Array;
  keys: KeysService;
  calls: ModelCallDeps;
}

export const RECORD_ROUTE = 'POST /v1/replay/capsules';
export const REPLAY_ROUTE = 'POST /v1/replay/capsules/:id/replay';

const capsuleNotFound = () => notFound('Replay capsule');
const iso = (d: Date | null) => (d ? d.toISOString() : null);

/**
 * Replay capsules: one chat request recorded (sealed, never returned), run once when recorded (its output
 * fingerprint is the baseline) and re-run on demand through the metered inference path under a key of the
 * account; each replay reports whether the output fingerprint changed, never what changed. Owns
 * replay_capsules and replay_runs.
 */
export class ReplayService {
  private readonly sealer: Sealer;

  constructor(private readonly d: ReplayDeps) {
    this.sealer = new Sealer(d.sealKey);
  }

  private aad = (id: string) => `replay_capsule:${id}`;

  private capacityError(n: number) {
    return new ServiceError('conflict', `An account holds at most ${CAPSULES_CAP} replay capsules and this one holds ${n} (deleted capsules count: their rows stay)`, { reason: 'capsule_limit', limit: CAPSULES_CAP });
  }

  /** Records a request: runs it once (metered, receipted) for the baseline fingerprint, then stores it sealed. */
  async record(accountId: string, input: RecordInput) {
    const request = input.request as Record<string, unknown>;
    if (request.stream === true) throw invalid('request.stream: a capsule records a non-streamed request', 'request.stream');
    const p = await inferenceKeyOf(this.d.keys, accountId, input.key_id, 'key_id');
    const n = await countCapsules(this.d.db, accountId);
    if (n >= CAPSULES_CAP) throw this.capacityError(n); // before the run is paid for
    const canonical = canonicalize(request);
    const answer = await this.run(p, JSON.parse(canonical) as Record<string, unknown>, RECORD_ROUTE);
    const id = newId('cap_');
    const row = await this.d.db.transaction().execute(async (trx) => {
      await lockCapsules(trx, accountId);
      const m = await countCapsules(trx, accountId);
      if (m >= CAPSULES_CAP) throw this.capacityError(m);
      return insertCapsule(trx, {
        id,
        account_id: accountId,
        key_id: p.keyId,
        model: String(request.model),
        request_sealed: this.sealer.seal(canonical, this.aad(id)),
        request_sha256: requestFingerprint(request),
        output_sha256: outputFingerprint(answer.body),
        receipt_id: answer.requestId,
        cost_micro_usd: answer.costMicroUsd,
        last_replayed_at: null,
        created_at: this.d.clock.now(),
        deleted_at: null,
      });
    });
    return this.view(row);
  }

  private run(p: KeyPrincipal, request: Record<string, unknown>, route: string): Promise<ModelAnswer> {
    return chatUnderKey(this.d.calls, p, request, { route, checkChatRoute: true });
  }

  async list(accountId: string) {
    return { capsules: (await listCapsules(this.d.db, accountId, CAPSULES_CAP)).map((r) => this.view(r)) };
  }

  async get(accountId: string, id: string) {
    const c = await ownedCapsule(this.d.db, accountId, id);
    if (!c) throw capsuleNotFound();
    return { ...this.view(c), replays: (await listRuns(this.d.db, id, REPLAYS_KEPT)).map((r) => this.runView(r, c)) };
  }

  /** Destroys the sealed request; the row and its history stay. Idempotent. */
  async remove(accountId: string, id: string) {
    const c = await destroyRequest(this.d.db, accountId, id, this.d.clock.now());
    if (!c) throw capsuleNotFound();
    return this.view(c);
  }

  /** The capsule with its request opened (replays, autopilot's evaluations); 410 once its sealed request was destroyed. */
  async request(accountId: string, id: string): Promise<{ capsule: CapsuleRow; request: Record<string, unknown> }> {
    const c = await ownedCapsule(this.d.db, accountId, id);
    if (!c) throw capsuleNotFound();
    if (!c.request_sealed) throw new ServiceError('gone', `Replay capsule ${id} was deleted: its sealed request is destroyed and cannot be replayed`, { reason: 'capsule_deleted' });
    return { capsule: c, request: JSON.parse(this.sealer.open(c.request_sealed, this.aad(id)).toString('utf8')) as Record<string, unknown> };
  }

  /** Re-runs the request and reports whether the output fingerprint differs from the baseline. */
  async replay(accountId: string, id: string, keyId?: string) {
    const { capsule, request } = await this.request(accountId, id);
    const p = await inferenceKeyOf(this.d.keys, accountId, keyId ?? capsule.key_id, keyId ? 'key_id' : 'capsule.key_id');
    const answer = await this.run(p, request, REPLAY_ROUTE);
    const fingerprint = outputFingerprint(answer.body);
    const run = await this.d.db.transaction().execute((trx) =>
      insertRun(
        trx,
        {
          id: newId('rpl_'),
          capsule_id: id,
          account_id: accountId,
          key_id: p.keyId,
          model: answer.receipt.payload.model,
          output_sha256: fingerprint,
          changed: fingerprint !== capsule.output_sha256,
          receipt_id: answer.requestId,
          cost_micro_usd: answer.costMicroUsd,
          created_at: this.d.clock.now(),
        },
        REPLAYS_KEPT,
      ),
    );
    return this.runView(run, capsule);
  }

  private runView(r: RunRow, c: CapsuleRow) {
    return {
      id: r.id,
      object: 'replay' as const,
      capsule_id: r.capsule_id,
      changed: r.changed,
      output_sha256: r.output_sha256,
      baseline_output_sha256: c.output_sha256,
      model: r.model,
      key_id: r.key_id,
      receipt_id: r.receipt_id,
      cost_micro_usd: Number(r.cost_micro_usd),
      created_at: r.created_at.toISOString(),
    };
  }

  view(c: CapsuleRow) {
    return {
      id: c.id,
      object: 'replay.capsule' as const,
      model: c.model,
      key_id: c.key_id,
      request_sha256: c.request_sha256,
      request_destroyed: c.request_sealed === null,
      baseline: { output_sha256: c.output_sha256, receipt_id: c.receipt_id, cost_micro_usd: Number(c.cost_micro_usd) },
      replay_count: c.replay_count,
      changed_count: c.changed_count,
      last_replayed_at: iso(c.last_replayed_at),
      created_at: c.created_at.toISOString(),
      deleted_at: iso(c.deleted_at),
    };
  }
}

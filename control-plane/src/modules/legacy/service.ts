import type { Kysely } from 'kysely';
import { ServiceError, Sealer, checksumAddress, invalid, newId, newSecret, notFound, sha256Hex, type Clock } from '@svc/shared';
import type { LegacyConfig } from '../../config/legacy.ts';
import type { DB } from '../../db/schema.ts';
import type { StepFault } from '../../jobs/faults.ts';
import type { Anchors } from '../anchors/service.ts';
import type { IdentityService } from '../identity/service.ts';
import { appendEvent, GENESIS, type ChainedEvent } from './chain.ts';
import { sealContent, type ContentIn } from './content.ts';
import { ANCHOR_KIND, CLAIM_TOKEN_PREFIX, CUSTODY, GRACE_DEFAULT_SECONDS, INTERVAL_MAX_SECONDS, LIST_CAP } from './limits.ts';
import { currentObjects, destroyContent, events, insertPlan, listPlans, liveCount, ownedPlan, partiesOf, replaceContent, type PlanMeta } from './store.ts';
import { planDetail, planSummary } from './views.ts';
import { instantOf } from '../../http/fields.ts';

export interface LegacyDeps {
  db: Kysely<DB>;
  clock: Clock;
  sealKey: Uint8Array;
  anchors: Anchors;
  identity: IdentityService;
  publicUrl: URL;
  config: LegacyConfig;
  /** Test seam: called between the steps of leader work (a throw stands for the process dying there). */
  stepFault?: StepFault | undefined;
}

export interface PartyIn {
  wallet: string;
  label?: string | undefined;
}

export interface CreateIn extends ContentIn {
  name: string;
  checkin_interval_seconds: number;
  grace_seconds?: number | undefined;
  deadline?: string | undefined;
  beneficiaries: PartyIn[];
  attesters?: PartyIn[] | undefined;
  quorum?: number | undefined;
}

export const planNotFound = () => notFound('Legacy plan');

/** Refuses a wallet named twice, or named both beneficiary and attester (each named by its field). */
function checkParties(b: PartyIn[], a: PartyIn[]): void {
  const seen = new Map<string, string>();
  for (const [role, list] of [['beneficiaries', b], ['attesters', a]] as const) {
    list.forEach((p, i) => {
      const w = p.wallet.toLowerCase();
      const earlier = seen.get(w);
      if (earlier) throw invalid(`body.${role}[${i}].wallet: ${checksumAddress(w)} is already named in ${earlier} (a wallet is one party of a plan)`, `${role}[${i}].wallet`);
      seen.set(w, `${role}[${i}]`);
    });
  }
}

/**
 * Legacy plans, the owner's side: create (sealed note and files, beneficiaries each with a claim link shown
 * once, optional attesters and quorum), list, detail (content-free, with the chained events and their anchor
 * state), check in, replace the content, cancel. Every change of state chains an event in the transaction
 * that makes it; the event hashes are queued for the public anchors once committed.
 */
export class LegacyService {
  readonly sealer: Sealer;
  private readonly base: string;

  constructor(readonly d: LegacyDeps) {
    this.sealer = new Sealer(d.sealKey);
    this.base = d.publicUrl.href.replace(/\/+$/, '');
  }

  /** Queues chained events for the public anchors (a detail read queues any a dead process left out). */
  /** Queues events for anchoring in the transaction that appends them, so none is ever appended and not queued. */
  async anchor(trx: Kysely<DB>, planId: string, evs: ChainedEvent[]): Promise<void> {
    await this.d.anchors.enqueueIn(trx, ANCHOR_KIND, evs.map((e) => ({ ref: `${planId}:${e.seq}`, hash: e.hash })));
  }

  claimLinks(token: string) {
    const e = encodeURIComponent(token);
    return { claim_url: `${this.base}/legacy/claim/${e}`, api_url: `${this.base}/v1/legacy/claim/${e}` };
  }

  async create(accountId: string, input: CreateIn) {
    const now = this.d.clock.now();
    const attesters = input.attesters ?? [];
    checkParties(input.beneficiaries, attesters);
    if (input.quorum !== undefined && attesters.length === 0) throw invalid('body.quorum: a quorum needs attesters', 'quorum');
    if (input.quorum !== undefined && input.quorum > attesters.length) throw invalid(`body.quorum: ${input.quorum} is more than the ${attesters.length} attesters named`, 'quorum');
    const quorum = attesters.length ? (input.quorum ?? Math.floor(attesters.length / 2) + 1) : null;
    const deadline = input.deadline ? instantOf(input.deadline, 'deadline') : new Date(now.getTime() + input.checkin_interval_seconds * 1000);
    if (deadline.getTime() <= now.getTime()) throw invalid('body.deadline: must be in the future', 'deadline');
    if (deadline.getTime() > now.getTime() + INTERVAL_MAX_SECONDS * 1000) throw invalid(`body.deadline: at most ${INTERVAL_MAX_SECONDS} seconds from now`, 'deadline');

    const id = newId('lgp_');
    const content = sealContent(this.sealer, id, 1, input, now);
    const tokens = input.beneficiaries.map(() => newSecret(CLAIM_TOKEN_PREFIX));
    const parties = [
      ...input.beneficiaries.map((b, i) => ({ plan_id: id, role: 'beneficiary' as const, wallet: b.wallet.toLowerCase(), label: b.label ?? null, position: i, claim_token_hash: sha256Hex(tokens[i]!), confirmed_at: null, claimed_at: null })),
      ...attesters.map((a, i) => ({ plan_id: id, role: 'attester' as const, wallet: a.wallet.toLowerCase(), label: a.label ?? null, position: i, claim_token_hash: null, confirmed_at: null, claimed_at: null })),
    ];
    const grace = input.grace_seconds ?? GRACE_DEFAULT_SECONDS;
    await this.d.db.transaction().execute(async (trx) => {
      // Creations of one account run one at a time here, so the live-plan limit holds under concurrency.
      await this.d.identity.lockAccount(trx, accountId);
      const live = await liveCount(trx, accountId);
      if (live >= this.d.config.maxActivePlans) {
        throw new ServiceError('conflict', `An account keeps at most ${this.d.config.maxActivePlans} live legacy plans (active or in warning) and this one has ${live}`, {
          reason: 'plan_limit',
          limit: this.d.config.maxActivePlans,
        });
      }
      const plan = {
        id, account_id: accountId, name: input.name, status: 'active' as const, checkin_interval_seconds: input.checkin_interval_seconds, grace_seconds: grace, quorum,
        deadline_at: deadline, warned_at: null, released_at: null, cancelled_at: null, last_checkin_at: null, note_sealed: content.note, note_bytes: content.noteBytes,
        content_version: 1, event_count: 0, head_hash: GENESIS, created_at: now,
      };
      await insertPlan(trx, plan, parties, content.objects);
      const ev = await appendEvent(trx, plan, 'created', now, {
        beneficiaries: input.beneficiaries.length,
        attesters: attesters.length,
        quorum,
        checkin_interval_seconds: input.checkin_interval_seconds,
        grace_seconds: grace,
        deadline_at: deadline.toISOString(),
        objects: content.objects.length,
        note_bytes: content.noteBytes,
      });
      await this.anchor(trx, id, [ev]);
    });
    const detail = await this.detail(accountId, id);
    return {
      ...detail,
      claim_links: input.beneficiaries.map((b, i) => ({ wallet: checksumAddress(b.wallet), label: b.label ?? null, token: tokens[i]!, ...this.claimLinks(tokens[i]!) })),
    };
  }

  async list(accountId: string) {
    const plans = await listPlans(this.d.db, accountId, LIST_CAP);
    const ids = plans.map((p) => p.id);
    const [parties, objects] = await Promise.all([partiesOf(this.d.db, ids), currentObjects(this.d.db, ids)]);
    return {
      plans: plans.map((p) => planSummary(p, parties.filter((x) => x.plan_id === p.id), objects.filter((o) => o.plan_id === p.id))),
      max_active_plans: this.d.config.maxActivePlans,
      custody: CUSTODY,
    };
  }

  async detail(accountId: string, id: string) {
    const p = await ownedPlan(this.d.db, accountId, id);
    if (!p) throw planNotFound();
    return this.detailOf(p);
  }

  private async detailOf(p: PlanMeta) {
    const [parties, objects, evs] = await Promise.all([partiesOf(this.d.db, [p.id]), currentObjects(this.d.db, [p.id]), events(this.d.db, p.id)]);
    const anchors = await this.d.anchors.fields(ANCHOR_KIND, evs.map((e) => ({ ref: `${p.id}:${e.seq}`, hash: e.hash })), true);
    return planDetail(p, parties, objects, evs, anchors);
  }

  /**
   * Runs `fn` on the account's plan under its row lock, refusing (409) a plan in one of `refused`; chains what
   * `fn` returns and answers the plan's detail.
   */
  private async change(accountId: string, id: string, refused: PlanMeta['status'][], what: string, fn: (trx: Kysely<DB>, p: PlanMeta, now: Date) => Promise<ChainedEvent[]>) {
    const now = this.d.clock.now();
    await this.d.db.transaction().execute(async (trx) => {
      const p = await ownedPlan(trx, accountId, id, true);
      if (!p) throw planNotFound();
      if (refused.includes(p.status)) {
        throw new ServiceError('conflict', `This legacy plan is ${p.status}: it cannot ${what}`, { reason: p.status, status: p.status });
      }
      await this.anchor(trx, id, await fn(trx, p, now));
    });
    return this.detail(accountId, id);
  }

  /** Check-in: the deadline moves to now plus the cadence, a warning ends, every attester confirmation is cleared. */
  checkin(accountId: string, id: string) {
    return this.change(accountId, id, ['released', 'cancelled'], 'be checked in to', async (trx, p, now) => {
      const deadline = new Date(now.getTime() + p.checkin_interval_seconds * 1000);
      const cleared = await trx.updateTable('legacy_parties').set({ confirmed_at: null }).where('plan_id', '=', p.id).where('confirmed_at', 'is not', null).executeTakeFirst();
      await trx.updateTable('legacy_plans').set({ status: 'active', deadline_at: deadline, warned_at: null, last_checkin_at: now }).where('id', '=', p.id).execute();
      return [await appendEvent(trx, p, 'checked_in', now, { deadline_at: deadline.toISOString(), warning_cleared: p.status === 'warning', confirmations_cleared: Number(cleared.numUpdatedRows) })];
    });
  }

  /** Replaces note and files: the earlier ciphertexts are destroyed, their metadata stays. */
  replace(accountId: string, id: string, content: ContentIn) {
    return this.change(accountId, id, ['released', 'cancelled'], 'have its content replaced', async (trx, p, now) => {
      const version = p.content_version + 1;
      const sealed = sealContent(this.sealer, p.id, version, content, now);
      await replaceContent(trx, p.id, version, sealed.note, sealed.noteBytes, sealed.objects, now);
      return [await appendEvent(trx, p, 'content_replaced', now, { version, objects: sealed.objects.length, note_bytes: sealed.noteBytes })];
    });
  }

  /**
   * Cancel: the note and every file's ciphertext nulled and every claim token killed in one transaction; the
   * content-free history stays. Idempotent (a cancelled plan answers as it is).
   */
  async cancel(accountId: string, id: string) {
    return this.change(accountId, id, [], 'be cancelled', async (trx, p, now) => {
      if (p.status === 'cancelled') return [];
      await destroyContent(trx, p.id, now);
      return [await appendEvent(trx, p, 'cancelled', now, { previous_status: p.status })];
    });
  }
}

import { sql, type Kysely } from 'kysely';
import { ServiceError, newId, type Clock } from '@svc/shared';
import type { BillingConfig } from '../../config.ts';
import type { DB } from '../../db/schema.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import { Batcher } from '../../db/batcher.ts';
import { paymentTerms } from './x402.ts';
import { CreditLeases, type Lease } from './leases.ts';
import { holdMany, runBatch, type HoldItem, type HoldResult } from './batch-calls.ts';
import type { Hold, HoldRequest } from './types.ts';

/**
 * Admission, the money path's first step: a hold of the request's maximum cost, out of this process's credit
 * lease (in memory, no round trip) or from the database (svc_hold_many, one round trip shared with the holds
 * beside it, which may grant or top up a lease); refused with the 402 that says why. The credit leases are
 * this module's alone: a settle or a release gives its reservation back through `finished`.
 */
export class Admission {
  private readonly holds: Batcher<HoldItem, HoldResult>;
  readonly leases: CreditLeases;

  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly cfg: BillingConfig,
  ) {
    this.holds = new Batcher((items) => runBatch(items, (i) => holdMany(db, clock.now(), cfg, i)));
    this.leases = new CreditLeases(db, clock, { ttlSeconds: cfg.leaseSeconds, wantRequests: 64, idleMs: 2000 });
  }

  /**
   * Resolves a key principal again, bypassing caches (KeysService.refreshPrincipal). The hold calls it when a
   * key of the chain was rotated out after the principal was resolved (outcome `key_stale`).
   */
  refreshPrincipal: ((p: KeyPrincipal) => Promise<KeyPrincipal>) | null = null;

  async hold(req: HoldRequest): Promise<Hold> {
    if (!Number.isSafeInteger(req.maxCostMicroUsd) || req.maxCostMicroUsd < 0) throw new Error('hold amount must be a non-negative integer');
    const leasable = this.leases.enabled && !req.durable && req.runId === null && req.maxCostMicroUsd > 0;
    if (leasable) {
      const l = this.leases.reserve(req.principal.accountId, req.principal.chain, req.maxCostMicroUsd);
      if (l) {
        this.topUp(l, req);
        return this.leaseHold(l, req);
      }
    }
    let recalled = false;
    for (let attempt = 0; ; attempt++) {
      const held = await this.holdOnce(req, leasable && attempt === 0, !recalled);
      if (held === 'recalled') recalled = true;
      if (held === 'retry' || held === 'recalled') continue;
      if (held !== 'key_stale') return held;
      if (!this.refreshPrincipal || attempt > 1) throw new ServiceError('invalid_credential', `API key ${req.principal.keyId} was rotated; send the request again`);
      req = { ...req, principal: await this.refreshPrincipal(req.principal) };
    }
  }

  private leaseHold(l: Lease, req: HoldRequest): Hold {
    return { id: l.id, accountId: req.principal.accountId, keyId: req.principal.keyId, amount: req.maxCostMicroUsd, requestId: req.requestId, runId: null, route: req.route, runHead: null, runCount: 0, chain: l.chain, lease: true, policy: req.principal.policy?.stamp ?? null };
  }

  /** Tops a lease up in the background before it runs out; the top-up holds nothing when no lease can be granted. */
  private topUp(l: Lease, req: HoldRequest): void {
    const ask = this.leases.topUpDue(l);
    if (!ask) return;
    this.holds
      .submit({ id: newId('hold_', 20), account: l.account, chain: l.chain, amount: req.maxCostMicroUsd, request: `${l.id}:top-up`, run: null, lease: ask })
      .then(
        (row) => this.leases.toppedUp(l, row.outcome === 'held' ? Number(row.lease ?? 0) : 0, row.lease_gone === true),
        () => this.leases.toppedUp(l, 0, false),
      );
  }

  private async holdOnce(req: HoldRequest, leasable: boolean, mayRecall: boolean): Promise<Hold | 'key_stale' | 'retry' | 'recalled'> {
    const id = newId('hold_', 20);
    const ask = leasable ? this.leases.ask(req.principal.accountId, req.principal.chain, req.maxCostMicroUsd) : null;
    let row: HoldResult;
    try {
      row = await this.holds.submit({ id, account: req.principal.accountId, chain: req.principal.chain, amount: req.maxCostMicroUsd, request: req.requestId, run: req.runId, ...(ask ? { lease: ask } : {}) });
    } catch (e) {
      if (ask) this.leases.answered(req.principal.accountId, req.principal.chain, ask, 0, 0, false);
      throw e;
    }
    const granted = ask
      ? this.leases.answered(req.principal.accountId, req.principal.chain, ask, row.outcome === 'held' ? Number(row.lease ?? 0) : 0, req.maxCostMicroUsd, row.lease_gone === true)
      : null;
    if (granted === 'lost') return 'retry';
    if (granted) return this.leaseHold(granted, req);
    // Refused only because credit is leased to processes: this one gives its leases of the account back at
    // once and holds again; others were notified (svc_leases) and give theirs back within moments.
    if (mayRecall && row.recall && row.outcome !== 'held' && this.leases.hasLeases(req.principal.accountId)) {
      await this.leases.returnAccount(req.principal.accountId);
      return 'recalled';
    }
    switch (row.outcome) {
      case 'held':
        return {
          id,
          accountId: req.principal.accountId,
          keyId: req.principal.keyId,
          amount: req.maxCostMicroUsd,
          requestId: req.requestId,
          runId: req.runId,
          route: req.route,
          runHead: row.run_head,
          runCount: row.run_count ?? 0,
          chain: req.principal.chain,
          lease: false,
          policy: req.principal.policy?.stamp ?? null, // policies
        };
      case 'insufficient_credit': {
        const spendable = Number(row.balance) - Number(row.held);
        const shortfall = req.maxCostMicroUsd - spendable;
        throw new ServiceError('insufficient_credit', `Not enough credit: this request needs up to ${req.maxCostMicroUsd} micro-USD and ${Math.max(0, spendable)} is spendable`, {
          ...paymentTerms(this.cfg, { shortfallMicroUsd: shortfall, resource: req.resource, description: `Prepaid credit for ${req.route}` }),
          balance_micro_usd: Number(row.balance),
          held_micro_usd: Number(row.held),
          required_micro_usd: req.maxCostMicroUsd,
        });
      }
      case 'spend_cap_reached':
        throw new ServiceError('spend_cap_reached', `The spend cap of key ${row.key_id} would be exceeded by this request; raise it on a new key or wait for another key`, { key_id: row.key_id });
      case 'circuit_breaker_tripped':
        throw new ServiceError(
          'circuit_breaker_tripped',
          `Key ${row.key_id} spent faster than ${this.cfg.breakerLimitMicroUsd} micro-USD per ${this.cfg.breakerWindowSeconds} s and was frozen; its owner can unfreeze it with POST /v1/keys/{id}/unfreeze`,
          { key_id: row.key_id },
        );
      case 'key_invalid':
        throw new ServiceError('invalid_credential', `API key ${row.key_id} was revoked or has expired`);
      case 'key_stale':
        return 'key_stale';
      default:
        throw new Error(`hold failed: ${row.outcome} ${row.error ?? ''}`);
    }
  }

  /**
   * A request admitted from lease `leaseId` ended: `reserved` of its reservation goes back to the lease, and
   * `cost` of it was charged out of the lease row (0: nothing charged).
   */
  finished(leaseId: string, reserved: number, cost: number): Promise<void> | undefined {
    return this.leases.finished(leaseId, reserved, cost);
  }

  /** Releases a hold whose request failed; nothing is charged. */
  async release(hold: Hold): Promise<boolean> {
    if (hold.lease) {
      await this.leases.finished(hold.id, hold.amount, 0);
      return true;
    }
    const r = await sql<{ ok: boolean }>`select svc_release_hold(${hold.id}, ${this.clock.now()}) as ok`.execute(this.db);
    return r.rows[0]?.ok === true;
  }

  /** Gives this process's credit leases back (shutdown). */
  close(): Promise<void> {
    return this.leases.closeAll();
  }
}

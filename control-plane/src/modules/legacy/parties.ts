import { ServiceError, checksumAddress, invalid, notFound, sha256Hex } from '@svc/shared';
import type { SessionPrincipal } from '../../http/auth-types.ts';
import { appendEvent, type ChainedEvent } from './chain.ts';
import { noteAad, objectAad } from './content.ts';
import { LIST_CAP } from './limits.ts';
import type { LegacyService } from './service.ts';
import { byClaimToken, confirmations, currentObjects, objectContent, planById, plansNaming, sealedNote } from './store.ts';
import { objectView, releaseEarliest } from './views.ts';

/** The uniform answer of the public claim route: an unknown token and a cancelled plan's token are the same. */
const claimNotFound = () => notFound('Legacy claim');
const noRelease = (id: string) => notFound(`Released legacy plan ${id} naming a wallet of this session as beneficiary`);

/**
 * Legacy plans, the other parties' side. Attesters and beneficiaries are wallets: a session holds the
 * wallets linked to the person signed in (for a session acting for an org, the member acting, never the
 * org's billing account). Attest, the attester's list, the beneficiary's released claims, opening a claim
 * (`claimed` chained once per beneficiary), one released file, and the public claim link.
 */
export class LegacyParties {
  constructor(private readonly svc: LegacyService) {}

  private get d() {
    return this.svc.d;
  }

  /** Lowercase addresses of the wallets the session's person holds. */
  async wallets(p: SessionPrincipal): Promise<string[]> {
    const list = await this.d.identity.listWallets(p.org?.memberAccountId ?? p.accountId);
    return list.map((w) => w.address.toLowerCase());
  }

  /**
   * Confirms as a named attester. Counted only while the plan is in warning (409 otherwise); idempotent within
   * one warning. A plan that names none of the session's wallets as attester is not found.
   */
  async attest(p: SessionPrincipal, planId: string, wallet: string | undefined) {
    const held = await this.wallets(p);
    const now = this.d.clock.now();
    const result = await this.d.db.transaction().execute(async (trx) => {
      const plan = await planById(trx, planId, true);
      const named = plan ? (await trx.selectFrom('legacy_parties').select(['wallet', 'confirmed_at']).where('plan_id', '=', planId).where('role', '=', 'attester').orderBy('position').execute()).filter((a) => held.includes(a.wallet)) : [];
      if (!plan || named.length === 0 || plan.status === 'cancelled') throw notFound(`Legacy plan ${planId} naming a wallet of this session as attester`);
      let mine = named[0]!;
      if (wallet !== undefined) {
        const w = named.find((a) => a.wallet === wallet.toLowerCase());
        if (!w) throw invalid(`body.wallet: ${checksumAddress(wallet)} is not a named attester of this plan held by this session`, 'wallet');
        mine = w;
      } else if (named.length > 1) throw invalid('body.wallet: this session holds several named attesters of this plan; say which confirms', 'wallet');
      if (plan.status !== 'warning') {
        throw new ServiceError('conflict', `This legacy plan is ${plan.status}: confirmations count only while it is in warning (its deadline passed without a check-in)`, { reason: 'not_in_warning', status: plan.status });
      }
      const evs: ChainedEvent[] = [];
      let at = mine.confirmed_at;
      if (!at) {
        at = now;
        await trx.updateTable('legacy_parties').set({ confirmed_at: now }).where('plan_id', '=', planId).where('role', '=', 'attester').where('wallet', '=', mine.wallet).execute();
        evs.push(await appendEvent(trx, plan, 'attested', now, { attester: checksumAddress(mine.wallet) }));
      }
      await this.svc.anchor(trx, planId, evs);
      const n = (await confirmations(trx, [planId])).get(planId) ?? 0;
      return { plan_id: planId, status: plan.status, wallet: checksumAddress(mine.wallet), confirmed_at: at.toISOString(), confirmations: n, quorum: plan.quorum };
    });
    return result;
  }

  /** Plans naming one of the session's wallets as attester (cancelled ones left out), newest first. */
  async attesting(p: SessionPrincipal) {
    const rows = await plansNaming(this.d.db, await this.wallets(p), 'attester', ['active', 'warning', 'released'], LIST_CAP);
    return {
      plans: rows.map((r) => ({
        id: r.id,
        name: r.name,
        status: r.status,
        deadline_at: r.deadline_at.toISOString(),
        release_earliest_at: releaseEarliest(r)?.toISOString() ?? null,
        quorum: r.quorum,
        your_confirmation: { wallet: checksumAddress(r.wallet), confirmed_at: r.confirmed_at?.toISOString() ?? null },
      })),
    };
  }

  /** Released plans naming one of the session's wallets as beneficiary, newest first. */
  async claims(p: SessionPrincipal) {
    const rows = await plansNaming(this.d.db, await this.wallets(p), 'beneficiary', ['released'], LIST_CAP);
    const objects = await currentObjects(this.d.db, [...new Set(rows.map((r) => r.id))]);
    return {
      claims: rows.map((r) => ({
        plan_id: r.id,
        plan_name: r.name,
        wallet: checksumAddress(r.wallet),
        released_at: r.released_at!.toISOString(),
        claimed_at: r.claimed_at?.toISOString() ?? null,
        objects: objects.filter((o) => o.plan_id === r.id).length,
        note_bytes: r.note_bytes,
      })),
    };
  }

  /** The released plan and the first of the session's wallets it names as beneficiary, or 404. */
  private async released(p: SessionPrincipal, planId: string) {
    const rows = (await plansNaming(this.d.db, await this.wallets(p), 'beneficiary', ['released'], LIST_CAP)).filter((r) => r.id === planId);
    if (rows.length === 0) throw noRelease(planId);
    return rows[0]!;
  }

  /** Opens a released claim: the unsealed note and the object list; the first opening by a beneficiary chains `claimed`. */
  async open(p: SessionPrincipal, planId: string) {
    const r = await this.released(p, planId);
    const now = this.d.clock.now();
    const claimedAt = await this.d.db.transaction().execute(async (trx) => {
      const plan = await planById(trx, planId, true);
      if (!plan || plan.status !== 'released') throw noRelease(planId);
      const set = await trx
        .updateTable('legacy_parties')
        .set({ claimed_at: now })
        .where('plan_id', '=', planId)
        .where('role', '=', 'beneficiary')
        .where('wallet', '=', r.wallet)
        .where('claimed_at', 'is', null)
        .returning('claimed_at')
        .executeTakeFirst();
      if (!set) return r.claimed_at ?? now;
      await this.svc.anchor(trx, planId, [await appendEvent(trx, plan, 'claimed', now, { beneficiary: checksumAddress(r.wallet) })]);
      return now;
    });
    const sealed = await sealedNote(this.d.db, planId);
    if (!sealed) throw noRelease(planId); // cancelled in between
    const objects = await currentObjects(this.d.db, [planId]);
    return {
      plan_id: planId,
      plan_name: r.name,
      wallet: checksumAddress(r.wallet),
      released_at: r.released_at!.toISOString(),
      claimed_at: claimedAt.toISOString(),
      note: this.svc.sealer.open(sealed, noteAad(planId, r.content_version)).toString('utf8'),
      objects: objects.map(objectView),
    };
  }

  /** One file of a released plan naming a wallet of the session, base64. */
  async object(p: SessionPrincipal, planId: string, objectId: string) {
    await this.released(p, planId);
    const o = await objectContent(this.d.db, planId, objectId);
    if (!o || !o.content_sealed) throw notFound('Legacy object');
    const bytes = this.svc.sealer.open(o.content_sealed, objectAad(planId, o.id));
    return { ...objectView(o), plan_id: planId, content_b64: bytes.toString('base64') };
  }

  /** The public claim link: plan name, the wallet required, the status; unknown and cancelled are the same 404. */
  async publicClaim(token: string) {
    const row = await byClaimToken(this.d.db, sha256Hex(token));
    if (!row || row.status === 'cancelled') throw claimNotFound();
    return { plan_name: row.name, wallet_required: checksumAddress(row.wallet), status: row.status };
  }
}

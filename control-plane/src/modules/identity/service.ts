import type { ExpressionBuilder, Kysely } from 'kysely';
import {
  PREFIX,
  ServiceError,
  checksumAddress,
  newId,
  newSecret,
  notFound,
  randomId,
  sha256Hex,
  type Clock,
} from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import { ThrottledTouch } from '../../db/throttled-touch.ts';
import { retryOnUniqueViolation } from '../../db/errors.ts';
import type { SessionPrincipal } from '../../http/auth-types.ts';
import { NONCE_TTL_MS, checkSiwe, type SiwePolicy } from './siwe.ts';
import { lockAccountRow } from './account-lock.ts';

export interface IdentityOptions {
  siwe: SiwePolicy;
  sessionTtlSeconds: number;
  /** Called after an account's standing changes (suspension), so cached credentials are dropped. */
  onAccountChanged?: (accountId: string) => Promise<void>;
}

export interface NewSession {
  token: string;
  session_id: string;
  account_id: string;
  wallet_address: string;
  expires_at: string;
  created_account: boolean;
}

/** Sessions an account holds: its own, and those it switched into for an org (not others acting for it). */
function heldBy(eb: ExpressionBuilder<DB, 'sessions'>, accountId: string) {
  return eb.or([eb.and([eb('account_id', '=', accountId), eb('acting_account_id', 'is', null)]), eb('acting_account_id', '=', accountId)]);
}

/** Accounts, wallets (SIWE), sessions. Owns the accounts, wallets, siwe_nonces and sessions tables. */
export class IdentityService {
  private readonly touched: ThrottledTouch;
  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly opts: IdentityOptions,
  ) {
    this.touched = new ThrottledTouch((id, now) => this.db.updateTable('sessions').set({ last_seen_at: now }).where('id', '=', id).execute());
  }

  async issueNonce(): Promise<{ nonce: string; expires_at: string }> {
    const now = this.clock.now();
    const nonce = randomId(24);
    const expires = new Date(now.getTime() + NONCE_TTL_MS);
    await this.db.insertInto('siwe_nonces').values({ nonce, created_at: now, expires_at: expires, used_at: null }).execute();
    return { nonce, expires_at: expires.toISOString() };
  }

  /**
   * Deletes expired nonces (the leader's loop). Safe at any time: an expired nonce is refused anyway, and an
   * unknown one is refused the same way, so nothing deleted can be replayed. Returns how many went.
   */
  async purgeNonces(): Promise<number> {
    const r = await this.db.deleteFrom('siwe_nonces').where('expires_at', '<=', this.clock.now()).executeTakeFirst();
    return Number(r.numDeletedRows);
  }

  /** Consumes a nonce: true once for an issued, unexpired, unused nonce; never again. */
  private async consumeNonce(trx: Kysely<DB>, nonce: string, now: Date): Promise<void> {
    const r = await trx
      .updateTable('siwe_nonces')
      .set({ used_at: now })
      .where('nonce', '=', nonce)
      .where('used_at', 'is', null)
      .where('expires_at', '>', now)
      .executeTakeFirst();
    if (Number(r.numUpdatedRows) !== 1) {
      throw new ServiceError('invalid_siwe', 'nonce is unknown, expired or already used; request a new one from POST /v1/auth/nonce');
    }
  }

  /** SIWE sign-in: creates the account at first sign-in, always a new session. */
  async signIn(message: string, signature: string, userAgent: string | undefined): Promise<NewSession> {
    const now = this.clock.now();
    const v = checkSiwe(message, signature, this.opts.siwe, now);
    return retryOnUniqueViolation(() => this.db.transaction().execute(async (trx) => {
      await this.consumeNonce(trx, v.nonce, now);
      const wallet = await trx.selectFrom('wallets').select('account_id').where('address', '=', v.address).executeTakeFirst();
      let accountId = wallet?.account_id;
      const created = !accountId;
      if (!accountId) {
        accountId = newId(PREFIX.account);
        await trx.insertInto('accounts').values({ id: accountId, created_at: now, suspended_at: null, suspended_reason: null }).execute();
        await trx.insertInto('wallets').values({ address: v.address, account_id: accountId, linked_at: now }).execute();
      } else {
        await this.assertNotSuspended(trx, accountId);
      }
      const s = await this.createSession(trx, accountId, v.address, userAgent, now);
      return { ...s, wallet_address: checksumAddress(v.address), created_account: created };
    }));
  }

  private async assertNotSuspended(trx: Kysely<DB>, accountId: string): Promise<void> {
    const a = await trx.selectFrom('accounts').select('suspended_at').where('id', '=', accountId).executeTakeFirst();
    if (a?.suspended_at) throw new ServiceError('account_suspended', 'This account is suspended');
  }

  private async createSession(trx: Kysely<DB>, accountId: string, wallet: string | null, userAgent: string | undefined, now: Date, org?: { id: string; memberAccountId: string }) {
    const token = newSecret(PREFIX.session);
    const id = newId('ses_', 20);
    const expires = new Date(now.getTime() + this.opts.sessionTtlSeconds * 1000);
    await trx
      .insertInto('sessions')
      .values({
        id,
        token_hash: sha256Hex(token),
        account_id: accountId,
        wallet_address: wallet,
        created_at: now,
        expires_at: expires,
        last_seen_at: now,
        revoked_at: null,
        user_agent: userAgent?.slice(0, 256) ?? null,
        org_id: org?.id ?? null,
        acting_account_id: org?.memberAccountId ?? null,
      })
      .execute();
    return { token, session_id: id, account_id: accountId, wallet_address: wallet ? checksumAddress(wallet) : null, expires_at: expires.toISOString() };
  }

  /** Resolves a session token for the auth layer. */
  async authenticate(token: string): Promise<SessionPrincipal> {
    const now = this.clock.now();
    const row = await this.db
      .selectFrom('sessions as s')
      .innerJoin('accounts as a', 'a.id', 's.account_id')
      .leftJoin('accounts as m', 'm.id', 's.acting_account_id')
      .select(['s.id', 's.account_id', 's.wallet_address', 's.expires_at', 's.revoked_at', 's.org_id', 's.acting_account_id', 'a.suspended_at'])
      .select('m.suspended_at as acting_suspended_at')
      .where('s.token_hash', '=', sha256Hex(token))
      .executeTakeFirst();
    if (!row) throw new ServiceError('invalid_credential', 'Unknown session token');
    if (row.revoked_at) throw new ServiceError('invalid_credential', 'This session has been logged out');
    if (row.expires_at.getTime() <= now.getTime()) throw new ServiceError('invalid_credential', 'This session has expired; sign in again');
    if (row.suspended_at || row.acting_suspended_at) throw new ServiceError('account_suspended', 'This account is suspended');
    this.touched.touch(row.id, now);
    const p: SessionPrincipal = { kind: 'session', accountId: row.account_id, sessionId: row.id, walletAddress: row.wallet_address };
    if (row.org_id && row.acting_account_id) p.org = { id: row.org_id, memberAccountId: row.acting_account_id, role: null };
    return p;
  }

  /**
   * A session acting for an org: it authenticates as the billing account and names the member acting.
   * Written on `db` (the caller's transaction, when it has one).
   */
  async mintOrgSession(db: Kysely<DB>, billingAccountId: string, org: { id: string; memberAccountId: string }, userAgent: string | undefined) {
    await this.assertNotSuspended(db, org.memberAccountId);
    return this.createSession(db, billingAccountId, null, userAgent, this.clock.now(), org);
  }

  /** Ends the org sessions of one member (or, with no member, of everyone acting for the org), on `db`. */
  async revokeOrgSessions(db: Kysely<DB>, orgId: string, memberAccountId?: string): Promise<number> {
    let q = db.updateTable('sessions').set({ revoked_at: this.clock.now() }).where('org_id', '=', orgId).where('revoked_at', 'is', null);
    if (memberAccountId) q = q.where('acting_account_id', '=', memberAccountId);
    return Number((await q.executeTakeFirst()).numUpdatedRows);
  }

  /**
   * A session for an account that proved itself without a wallet signature (a passkey), written on `db` (the
   * caller's transaction): the same session, and the same answer, as a SIWE sign-in. The session row names no
   * wallet (none signed); the answer's wallet_address is the account's first linked wallet, the one
   * GET /v1/auth/me reports.
   */
  async signInAccount(db: Kysely<DB>, accountId: string, userAgent: string | undefined): Promise<NewSession> {
    await this.assertNotSuspended(db, accountId);
    const wallet = await db.selectFrom('wallets').select('address').where('account_id', '=', accountId).orderBy('linked_at').executeTakeFirst();
    if (!wallet) throw new Error(`account ${accountId} has no linked wallet`); // every account is created by a wallet and keeps one
    const s = await this.createSession(db, accountId, null, userAgent, this.clock.now());
    return { ...s, wallet_address: checksumAddress(wallet.address), created_account: false };
  }

  /** Locks the account row for the rest of `db`'s transaction, so per-account limits of other modules hold under concurrency (see lockAccountRow). */
  async lockAccount(db: Kysely<DB>, accountId: string): Promise<void> {
    if (!(await lockAccountRow(db, accountId))) throw notFound('Account');
  }

  /** Whether an account exists (invites name existing accounts only). */
  async accountExists(db: Kysely<DB>, accountId: string): Promise<boolean> {
    return (await db.selectFrom('accounts').select('id').where('id', '=', accountId).executeTakeFirst()) !== undefined;
  }


  async me(p: SessionPrincipal) {
    const wallet =
      p.walletAddress ??
      (await this.db.selectFrom('wallets').select('address').where('account_id', '=', p.accountId).orderBy('linked_at').executeTakeFirst())?.address;
    return { account_id: p.accountId, wallet_address: wallet ? checksumAddress(wallet) : null };
  }

  async listSessions(p: SessionPrincipal) {
    const now = this.clock.now();
    const rows = await this.db
      .selectFrom('sessions')
      .select(['id', 'wallet_address', 'created_at', 'expires_at', 'last_seen_at', 'user_agent'])
      .where((eb) => heldBy(eb, p.accountId))
      .where('revoked_at', 'is', null)
      .where('expires_at', '>', now)
      .orderBy('created_at', 'desc')
      .execute();
    return rows.map((r) => ({
      id: r.id,
      current: r.id === p.sessionId,
      wallet_address: r.wallet_address ? checksumAddress(r.wallet_address) : null,
      user_agent: r.user_agent,
      created_at: r.created_at.toISOString(),
      last_seen_at: r.last_seen_at.toISOString(),
      expires_at: r.expires_at.toISOString(),
    }));
  }

  async logout(p: SessionPrincipal): Promise<{ revoked: number }> {
    const r = await this.db
      .updateTable('sessions')
      .set({ revoked_at: this.clock.now() })
      .where('id', '=', p.sessionId)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return { revoked: Number(r.numUpdatedRows) };
  }

  async logoutAll(accountId: string): Promise<{ revoked: number }> {
    const r = await this.db
      .updateTable('sessions')
      .set({ revoked_at: this.clock.now() })
      .where((eb) => heldBy(eb, accountId))
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return { revoked: Number(r.numUpdatedRows) };
  }

  /** The account a wallet (0x address, any case) is linked to, or null (on `db`, a transaction or not). */
  async accountOfWallet(db: Kysely<DB>, address: string): Promise<string | null> {
    const row = await db.selectFrom('wallets').select('account_id').where('address', '=', address.toLowerCase()).executeTakeFirst();
    return row?.account_id ?? null;
  }
  async listWallets(accountId: string) {
    const rows = await this.db
      .selectFrom('wallets')
      .select(['address', 'linked_at'])
      .where('account_id', '=', accountId)
      .orderBy('linked_at')
      .execute();
    return rows.map((r) => ({ address: checksumAddress(r.address), linked_at: r.linked_at.toISOString() }));
  }

  /** Links the wallet that signed `message`; a wallet belongs to one account. */
  async linkWallet(accountId: string, message: string, signature: string): Promise<{ created: boolean; wallet: { address: string; linked_at: string } }> {
    const now = this.clock.now();
    const v = checkSiwe(message, signature, this.opts.siwe, now);
    return this.db.transaction().execute(async (trx) => {
      const existing = await trx.selectFrom('wallets').select(['account_id', 'linked_at']).where('address', '=', v.address).executeTakeFirst();
      if (existing && existing.account_id !== accountId) {
        throw new ServiceError('wallet_taken', 'This wallet is already linked to another account');
      }
      await this.consumeNonce(trx, v.nonce, now);
      if (existing) return { created: false, wallet: { address: checksumAddress(v.address), linked_at: existing.linked_at.toISOString() } };
      await trx.insertInto('wallets').values({ address: v.address, account_id: accountId, linked_at: now }).execute();
      return { created: true, wallet: { address: checksumAddress(v.address), linked_at: now.toISOString() } };
    });
  }

  async unlinkWallet(accountId: string, address: string): Promise<void> {
    const addr = address.toLowerCase();
    await this.db.transaction().execute(async (trx) => {
      // Lock the account row so two concurrent unlinks cannot both remove "the second-to-last" wallet.
      await lockAccountRow(trx, accountId);
      const mine = await trx.selectFrom('wallets').select('address').where('account_id', '=', accountId).execute();
      if (!mine.some((w) => w.address === addr)) throw notFound('Wallet');
      if (mine.length === 1) throw new ServiceError('last_wallet', 'The last linked wallet cannot be unlinked');
      await trx.deleteFrom('wallets').where('address', '=', addr).where('account_id', '=', accountId).execute();
    });
  }

  async setSuspended(accountId: string, suspended: boolean, reason: string | null) {
    const now = this.clock.now();
    const r = await this.db
      .updateTable('accounts')
      .set(suspended ? { suspended_at: now, suspended_reason: reason } : { suspended_at: null, suspended_reason: null })
      .where('id', '=', accountId)
      .returning(['id', 'suspended_at', 'suspended_reason'])
      .executeTakeFirst();
    if (!r) throw notFound('Account');
    await this.opts.onAccountChanged?.(accountId);
    return { account_id: r.id, suspended: r.suspended_at !== null, reason: r.suspended_reason, suspended_at: r.suspended_at?.toISOString() ?? null };
  }

  async accountCount(): Promise<{ accounts: number; suspended: number }> {
    const r = await this.db
      .selectFrom('accounts')
      .select((eb) => [eb.fn.countAll<number>().as('accounts'), eb.fn.count<number>('suspended_at').as('suspended')])
      .executeTakeFirstOrThrow();
    return { accounts: Number(r.accounts), suspended: Number(r.suspended) };
  }
}

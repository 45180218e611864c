import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type AuthenticationResponseJSON,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
  type RegistrationResponseJSON,
} from '@simplewebauthn/server';
import { ServiceError, newId, type Clock } from '@svc/shared';
import type { PasskeyConfig } from '../../config.ts';
import type { DB } from '../../db/schema.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import type { SessionPrincipal } from '../../http/auth-types.ts';
import type { IdentityService, NewSession } from '../identity/service.ts';
import {
  CHALLENGE_TTL_MS,
  MAX_PASSKEYS,
  attestedAuthData,
  bytesOf,
  checkClientData,
  checkRpId,
  counterAdvances,
  knownTransports,
  readAuthData,
  readClientData,
  refuse,
} from './checks.ts';
import {
  challengeKey,
  consumeChallenge,
  deletePasskey,
  insertChallenge,
  insertPasskey,
  passkeyByCredential,
  passkeyCount,
  passkeyView,
  passkeysOf,
  purgeChallenges,
  recordUse,
  renamePasskey,
} from './store.ts';

const limitReached = () =>
  new ServiceError('conflict', `An account holds at most ${MAX_PASSKEYS} passkeys; remove one (DELETE /v1/auth/passkeys/:id) before adding another`, {
    reason: 'passkey_limit',
    limit: MAX_PASSKEYS,
  });

const staleChallenge = (what: string) =>
  refuse('challenge', `The challenge is unknown, expired, already used, or was issued for ${what}; request new options and run the ceremony again`);

/**
 * Passkeys (WebAuthn): registration on a signed-in account, sign-in with a discoverable credential.
 * Owns the passkeys and passkey_challenges tables; sessions are minted by IdentityService, inside this
 * module's transaction, exactly as a SIWE sign-in mints them.
 *
 * A challenge is random (32 bytes), kept as its sha256, valid for 5 minutes, bound to its ceremony (and a
 * registration challenge to its account), and used by the first verify that names it, whatever that verify
 * finds: a replayed response, or a second ceremony run on the same options, is refused.
 */
export class PasskeysService {
  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly identity: IdentityService,
    private readonly config: PasskeyConfig,
  ) {}

  private async storeChallenge(challenge: string, ceremony: 'register' | 'login', accountId: string | null): Promise<void> {
    const now = this.clock.now();
    await insertChallenge(this.db, { challenge_hash: challengeKey(challenge), ceremony, account_id: accountId, created_at: now, expires_at: new Date(now.getTime() + CHALLENGE_TTL_MS) });
  }

  /** Creation options for the signed-in account: a discoverable credential with user verification. */
  async registerOptions(p: SessionPrincipal): Promise<PublicKeyCredentialCreationOptionsJSON> {
    const existing = await passkeysOf(this.db, p.accountId);
    if (existing.length >= MAX_PASSKEYS) throw limitReached();
    const { wallet_address } = await this.identity.me(p);
    const label = wallet_address ?? p.accountId;
    const options = await generateRegistrationOptions({
      rpName: this.config.rpName,
      rpID: this.config.rpId,
      userID: new TextEncoder().encode(p.accountId),
      userName: label,
      userDisplayName: label,
      challenge: randomBytes(32),
      timeout: CHALLENGE_TTL_MS,
      attestationType: 'none',
      excludeCredentials: existing.map((c) => ({ id: c.credential_id, transports: c.transports })),
      authenticatorSelection: { residentKey: 'required', requireResidentKey: true, userVerification: 'required' },
    });
    await this.storeChallenge(options.challenge, 'register', p.accountId);
    return options;
  }

  /** Registers the credential a browser created from registerOptions; never creates an account. */
  async registerVerify(accountId: string, credential: RegistrationResponseJSON, name: string | undefined) {
    const now = this.clock.now();
    const cd = readClientData(credential.response.clientDataJSON, 'credential.response.clientDataJSON');
    const authData = attestedAuthData(credential.response.attestationObject, 'credential.response.attestationObject');
    if (!(await consumeChallenge(this.db, cd.challenge, 'register', accountId, now))) throw staleChallenge('another ceremony or account');
    checkClientData(cd, 'webauthn.create', this.config.origins);
    checkRpId(readAuthData(authData, 'credential.response.attestationObject').rpIdHash, this.config.rpId);
    let v: Awaited<ReturnType<typeof verifyRegistrationResponse>>;
    try {
      v = await verifyRegistrationResponse({
        response: credential,
        expectedChallenge: cd.challenge,
        expectedOrigin: [...this.config.origins],
        expectedRPID: this.config.rpId,
        requireUserVerification: true,
      });
    } catch (e) {
      throw refuse('attestation', `The new passkey did not verify: ${(e as Error).message}`);
    }
    if (!v.verified) throw refuse('attestation', 'The new passkey did not verify');
    const info = v.registrationInfo;
    try {
      return await this.db.transaction().execute(async (trx) => {
        await this.identity.lockAccount(trx, accountId); // two registrations at the limit run one after the other
        const n = await passkeyCount(trx, accountId);
        if (n >= MAX_PASSKEYS) throw limitReached();
        const row = await insertPasskey(trx, {
          id: newId('passkey_'),
          account_id: accountId,
          credential_id: info.credential.id,
          public_key: info.credential.publicKey,
          counter: info.credential.counter,
          transports: knownTransports(credential.response.transports ?? info.credential.transports),
          device_type: info.credentialDeviceType,
          backed_up: info.credentialBackedUp,
          aaguid: info.aaguid,
          name: name ?? `Passkey ${n + 1}`,
          created_at: now,
          last_used_at: null,
        });
        return passkeyView(row);
      });
    } catch (e) {
      if (isUniqueViolation(e)) throw new ServiceError('conflict', 'This passkey is already registered', { reason: 'passkey_registered' });
      throw e;
    }
  }

  /** Assertion options with no account named: the browser offers the passkeys it holds for this site. */
  async loginOptions(): Promise<PublicKeyCredentialRequestOptionsJSON> {
    const options = await generateAuthenticationOptions({
      rpID: this.config.rpId,
      challenge: randomBytes(32),
      timeout: CHALLENGE_TTL_MS,
      userVerification: 'required',
    });
    await this.storeChallenge(options.challenge, 'login', null);
    return options;
  }

  /** Verifies an assertion and signs its account in: the same session and answer as a SIWE sign-in. */
  async loginVerify(credential: AuthenticationResponseJSON, userAgent: string | undefined): Promise<NewSession> {
    const now = this.clock.now();
    const cd = readClientData(credential.response.clientDataJSON, 'credential.response.clientDataJSON');
    const auth = readAuthData(bytesOf(credential.response.authenticatorData, 'credential.response.authenticatorData'), 'credential.response.authenticatorData');
    if (credential.response.userHandle !== undefined) bytesOf(credential.response.userHandle, 'credential.response.userHandle');
    if (!(await consumeChallenge(this.db, cd.challenge, 'login', null, now))) throw staleChallenge('another ceremony');
    checkClientData(cd, 'webauthn.get', this.config.origins);
    checkRpId(auth.rpIdHash, this.config.rpId);
    const pk = await passkeyByCredential(this.db, credential.id);
    if (!pk) throw refuse('unknown_credential', 'This passkey is not registered here (it may have been removed); sign in with your wallet');
    if (credential.response.userHandle && new TextDecoder().decode(bytesOf(credential.response.userHandle, 'credential.response.userHandle')) !== pk.account_id) {
      throw refuse('user_handle', 'The passkey names another account than the one it is registered to');
    }
    if (!counterAdvances(pk.counter, auth.counter)) throw counterRefused(pk.counter, auth.counter);
    let v: Awaited<ReturnType<typeof verifyAuthenticationResponse>>;
    try {
      v = await verifyAuthenticationResponse({
        response: credential,
        expectedChallenge: cd.challenge,
        expectedOrigin: [...this.config.origins],
        expectedRPID: this.config.rpId,
        credential: { id: pk.credential_id, publicKey: new Uint8Array(pk.public_key), counter: pk.counter, transports: pk.transports },
        requireUserVerification: true,
      });
    } catch (e) {
      throw refuse('signature', `The passkey response did not verify: ${(e as Error).message}`);
    }
    if (!v.verified) throw refuse('signature', 'The signature does not verify against the registered passkey');
    const info = v.authenticationInfo;
    return this.db.transaction().execute(async (trx) => {
      // Locked and checked again: of two assertions racing with the same counter, one signs in.
      const row = await passkeyByCredential(trx, pk.credential_id, true);
      if (!row) throw refuse('unknown_credential', 'This passkey was removed; sign in with your wallet');
      if (!counterAdvances(row.counter, info.newCounter)) throw counterRefused(row.counter, info.newCounter);
      await recordUse(trx, row.id, { counter: info.newCounter, backedUp: info.credentialBackedUp, at: now });
      return this.identity.signInAccount(trx, row.account_id, userAgent);
    });
  }

  async list(accountId: string) {
    return (await passkeysOf(this.db, accountId)).map(passkeyView);
  }

  async rename(accountId: string, id: string, name: string) {
    return passkeyView(await renamePasskey(this.db, accountId, id, name));
  }

  /** Removes a passkey. Sessions it signed in stay until they expire or are logged out. */
  async remove(accountId: string, id: string) {
    await deletePasskey(this.db, accountId, id);
    return { id, object: 'passkey' as const, deleted: true as const };
  }

  /** Drops challenges past their expiry (the leader runs this hourly). */
  async purgeChallenges(): Promise<number> {
    return purgeChallenges(this.db, this.clock.now());
  }
}

const counterRefused = (stored: number, reported: number) =>
  refuse('counter', `The authenticator's signature counter (${reported}) did not increase past the last one seen (${stored}); the passkey may have been cloned`);

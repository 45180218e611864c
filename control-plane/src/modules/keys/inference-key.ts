import { ServiceError, invalid } from '@svc/shared';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { KeysService } from './service.ts';

/**
 * The principal of an API key of the account that work started by a session runs its model calls under
 * (eval runs, replays, autopilot analyses): it must be the account's, live, and hold the inference scope.
 * An unknown, revoked or expired key is refused with 400 naming `param`; a frozen key or a suspended account
 * keeps its own refusal (402, 403).
 */
export async function inferenceKeyOf(keys: KeysService, accountId: string, keyId: string, param: string): Promise<KeyPrincipal> {
  try {
    await keys.get(accountId, keyId);
  } catch (e) {
    if (e instanceof ServiceError && e.type === 'not_found') throw invalid(`${param}: the account has no API key ${keyId}`, param);
    throw e;
  }
  let p: KeyPrincipal;
  try {
    p = await keys.principalOf(keyId);
  } catch (e) {
    if (e instanceof ServiceError && e.type === 'invalid_credential') throw invalid(`${param}: ${e.message}`, param);
    throw e;
  }
  if (p.accountId !== accountId) throw invalid(`${param}: the account has no API key ${keyId}`, param);
  if (!p.scopes.includes('inference')) throw invalid(`${param}: this API key lacks the "inference" scope its calls need`, param);
  return p;
}

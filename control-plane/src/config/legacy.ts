import { intWithDefault } from './parse.ts';

/**
 * Legacy plans: how many plans one account keeps live at once (active or in warning; released and cancelled
 * plans do not count) and how often the leader moves plans along (active to warning at the deadline, warning
 * to released once the grace period has run and the attester quorum is met).
 */
export const legacyEnv = {
  SVC_LEGACY_MAX_ACTIVE_PLANS: intWithDefault(10, 1, 1000),
  SVC_LEGACY_EVERY_SECONDS: intWithDefault(60, 1, 86_400),
};

export interface LegacyConfig {
  maxActivePlans: number;
  everyMs: number;
}

export function legacyConfig(e: { SVC_LEGACY_MAX_ACTIVE_PLANS: number; SVC_LEGACY_EVERY_SECONDS: number }): LegacyConfig {
  return { maxActivePlans: e.SVC_LEGACY_MAX_ACTIVE_PLANS, everyMs: e.SVC_LEGACY_EVERY_SECONDS * 1000 };
}

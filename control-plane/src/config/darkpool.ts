import { z } from 'zod';
import type { ChainConfig } from './chains.ts';
import { ConfigError, flag, intWithDefault } from './parse.ts';

/**
 * The dark pool (intents and matches). Off unless SVC_DARKPOOL_ENABLED=true: every route of the group then
 * answers 501. The cash leg settles in USDT on one chain of SVC_CHAINS (SVC_DARKPOOL_CHAIN, default the
 * first); SVC_DARKPOOL_ASSETS narrows the eligible asset ids (comma-separated; unset: any well-formed id).
 * Every answer of POST /v1/matches is held until SVC_DARKPOOL_MATCH_FLOOR_MS after the request arrived, so a
 * negative answer takes the same time whatever the reason (it must exceed the slowest search).
 */
export const ASSET_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;

export const darkpoolEnv = {
  SVC_DARKPOOL_ENABLED: flag(false),
  SVC_DARKPOOL_CHAIN: z.string().regex(/^[a-z][a-z0-9-]{0,31}$/, 'must be the name of a chain of SVC_CHAINS').optional(),
  SVC_DARKPOOL_ASSETS: z
    .string()
    .optional()
    .transform((s, ctx) => {
      if (s === undefined) return null;
      const list = s.split(',').map((x) => x.trim()).filter(Boolean);
      for (const a of list) if (!ASSET_ID.test(a)) ctx.addIssue({ code: 'custom', message: `${a}: not an asset id (letters, digits, . _ : -; at most 64)` });
      return list;
    }),
  SVC_DARKPOOL_MATCH_FLOOR_MS: intWithDefault(250, 0, 10_000),
  SVC_DARKPOOL_MAX_RESTING: intWithDefault(100, 1, 10_000),
};

export interface DarkpoolConfig {
  enabled: boolean;
  /** The chain of the cash leg (its USDT); undefined only while disabled. */
  chain: ChainConfig | undefined;
  /** Eligible asset ids; null: any well-formed id. */
  assets: string[] | null;
  matchFloorMs: number;
  /** Resting intents one account holds at once. */
  maxResting: number;
}

type Env = {
  SVC_DARKPOOL_ENABLED: boolean;
  SVC_DARKPOOL_CHAIN?: string | undefined;
  SVC_DARKPOOL_ASSETS: string[] | null;
  SVC_DARKPOOL_MATCH_FLOOR_MS: number;
  SVC_DARKPOOL_MAX_RESTING: number;
};

export function darkpoolConfig(e: Env, chains: ChainConfig[]): DarkpoolConfig {
  let chain: ChainConfig | undefined;
  if (e.SVC_DARKPOOL_CHAIN) {
    chain = chains.find((c) => c.name === e.SVC_DARKPOOL_CHAIN);
    if (!chain) throw new ConfigError([`SVC_DARKPOOL_CHAIN: "${e.SVC_DARKPOOL_CHAIN}" names no chain of SVC_CHAINS (${chains.map((c) => c.name).join(', ') || 'none'})`]);
  } else chain = chains[0];
  if (e.SVC_DARKPOOL_ENABLED && !chain) throw new ConfigError(['SVC_DARKPOOL_ENABLED: needs a chain in SVC_CHAINS for the USDT cash leg']);
  return { enabled: e.SVC_DARKPOOL_ENABLED, chain, assets: e.SVC_DARKPOOL_ASSETS, matchFloorMs: e.SVC_DARKPOOL_MATCH_FLOOR_MS, maxResting: e.SVC_DARKPOOL_MAX_RESTING };
}

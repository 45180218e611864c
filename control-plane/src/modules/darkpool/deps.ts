import { ChainRegistry } from '../billing/chains.ts';
import { TransferVerifier } from '../billing/verifier.ts';
import { IntentsService, type DarkpoolDeps } from './intents.ts';
import { MatchesService, type MatchTrace } from './matches.ts';

/** The dark pool: intents and matches, with the cash leg verified on the configured chain. */
export interface Darkpool {
  config: DarkpoolDeps['config'];
  intents: IntentsService;
  matches: MatchesService;
  /** Set by a test to see how each question to POST /v1/matches was answered (unset: nothing is traced). */
  traceAnswers?: ((trace: MatchTrace) => void) | undefined;
}

export function createDarkpool(d: DarkpoolDeps): Darkpool {
  const intents = new IntentsService(d);
  const chains = new ChainRegistry(d.config.chain ? [d.config.chain] : []);
  return { config: d.config, intents, matches: new MatchesService(intents, new TransferVerifier(chains)) };
}

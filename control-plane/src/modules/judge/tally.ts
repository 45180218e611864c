/** The tally of a verdict (no imports: the pages' browser script recounts it with this file). */

export interface Tally {
  tally: Array<{ option: string; votes: number }>;
  abstentions: number;
  outcome: string | null;
}

/** Votes per option (in the options' order), abstentions, and the plurality winner (null on a tie or with no vote). */
export function tallyVotes(options: readonly string[], votes: ReadonlyArray<string | null>): Tally {
  const tally = options.map((option) => ({ option, votes: votes.filter((v) => v === option).length }));
  const top = Math.max(0, ...tally.map((t) => t.votes));
  const leaders = tally.filter((t) => t.votes === top);
  return { tally, abstentions: votes.filter((v) => v === null).length, outcome: top > 0 && leaders.length === 1 ? leaders[0]!.option : null };
}

export const DECISION_RULE = 'plurality of the votes cast; a tie, or no vote at all, is no outcome (null); abstentions count for no option';

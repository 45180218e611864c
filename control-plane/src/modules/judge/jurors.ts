import { parseJsonAnswer } from '../evals/assertions.ts';

/** The most characters of a rationale a juror may give; a longer one is out of format. */
export const MAX_RATIONALE_CHARS = 8000;

export const JUROR_SYSTEM =
  'You are a juror. Weigh the labeled evidence and answer the question by choosing exactly one of the options. ' +
  'Reply with only a JSON object and no other text: {"vote": "<one of the options, exactly as written>", "rationale": "<why, in a few sentences>"}.';

/** The juror's user message: the question, the numbered options and each evidence item under its label. */
export function jurorPrompt(question: string, options: readonly string[], evidence: ReadonlyArray<{ label: string; content: string }>): string {
  return [
    `Question:\n${question}`,
    `Options (vote with one, exactly as written):\n${options.map((o, i) => `${i + 1}. ${o}`).join('\n')}`,
    `Evidence:\n${evidence.map((e) => `[${e.label}]\n${e.content}`).join('\n\n')}`,
  ].join('\n\n');
}

/**
 * A juror's answer read: a JSON object (the whole answer, or one fenced block that is the whole answer) whose
 * `vote` is one of the options exactly (surrounding spaces aside) and whose `rationale` is a non-empty string.
 * Anything else is out of format: the string returned says how, in the gateway's words.
 */
export function readVote(text: string, options: readonly string[]): { vote: string; rationale: string } | string {
  const parsed = parseJsonAnswer(text);
  if (!parsed) return 'the answer is not JSON';
  const v = parsed.value;
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return 'the answer is not a JSON object';
  const { vote, rationale } = v as { vote?: unknown; rationale?: unknown };
  if (typeof vote !== 'string') return 'the answer has no vote';
  const chosen = options.find((o) => o === vote.trim());
  if (chosen === undefined) return 'the vote is not one of the options';
  if (typeof rationale !== 'string' || !rationale.trim()) return 'the answer has no rationale';
  if (rationale.length > MAX_RATIONALE_CHARS) return `the rationale is longer than ${MAX_RATIONALE_CHARS} characters`;
  return { vote: chosen, rationale };
}

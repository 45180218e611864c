import { trieSource } from './blocklist.ts';
import { foldedView, originalSpan } from './normalize.ts';
import { eachMatch, ordered, type Detector, type Match, type Severity } from './types.ts';

/**
 * Prompt-injection heuristics, run over the text folded (NFKC, case-folded, white space as single spaces:
 * `ＩＧＮＯＲＥ   previous\ninstructions` reads as `ignore previous instructions`). They are phrase patterns,
 * not a model: they catch the common wordings of each technique and miss paraphrases.
 * - instruction_override: telling the model to ignore, disregard, forget, override or bypass its previous,
 *   prior, above, earlier, original, initial, system or developer instructions (prompts, rules, guidelines,
 *   context), or "everything above"; "do not follow your instructions"; "your new instructions are";
 * - role_override: jailbreak personas and modes: "you are now DAN", "do anything now", "developer mode
 *   enabled", "act as an unrestricted/unfiltered/jailbroken AI", "pretend you have no rules", "you are no
 *   longer bound by";
 * - system_prompt_override: a new or overriding system prompt ("new system prompt:", "system override"), and
 *   chat-template control tokens written into content (`<|im_start|>`, `<|system|>`, `[INST]`, `<<SYS>>`,
 *   `<|endoftext|>`, `### System:`);
 * - prompt_exfiltration: asking to reveal, print or repeat the system prompt or hidden/initial instructions;
 * - hidden_instruction: invisible carriers (three or more zero-width characters in a row, Unicode tag
 *   characters), HTML comments addressed to an AI, "note to the AI", "hidden instructions:", "if you are an AI
 *   (assistant) reading this".
 */
export const INJECTION_CATEGORIES = ['instruction_override', 'role_override', 'system_prompt_override', 'prompt_exfiltration', 'hidden_instruction'] as const;
export type InjectionCategory = (typeof INJECTION_CATEGORIES)[number];

export const INJECTION_SEVERITY: Record<InjectionCategory, Severity> = {
  instruction_override: 'high',
  role_override: 'high',
  system_prompt_override: 'high',
  prompt_exfiltration: 'medium',
  hidden_instruction: 'medium',
};

const TARGET = '(?:instructions?|prompts?|rules|directions|directives|guidelines|guidance|constraints|restrictions|context|programming|commands|orders|training)';
const QUALIFIER = '(?:previous|prior|above|earlier|preceding|foregoing|initial|original|system|developer|your|all|any|every|existing|current|safety|the|these|those|of|my)';
const POINTING = /\b(?:previous|prior|above|earlier|preceding|foregoing|initial|original|system|developer|your|all|every|existing)\b/;

const PATTERNS: Array<{ category: InjectionCategory; re: RegExp; check?: (s: string) => boolean; needles: string[] }> = [
  { needles: ['ignor', 'disregard', 'forget', 'overrid', 'bypass', 'neglect', 'drop', 'abandon'], category: 'instruction_override', re: new RegExp(`\\b(?:ignore|disregard|forget|override|bypass|neglect|drop|abandon)(?: about)? (?:${QUALIFIER} ){1,4}${TARGET}\\b`, 'g'), check: (s) => POINTING.test(s) },
  { needles: ['ignor', 'disregard', 'forget'], category: 'instruction_override', re: /\b(?:ignore|disregard|forget) (?:everything|anything|all|what(?:ever)? (?:was|you were) (?:said|told)) (?:above|before|previously|prior|so far|until now)\b/g },
  { needles: ['not follow', "don't follow", 'never follow', 'stop follow', 'cease follow', 'not obey', "don't obey", 'never obey', 'stop obey', 'cease obey', 'not adher', "don't adher", 'never adher', 'stop adher', 'cease adher'], category: 'instruction_override', re: new RegExp(`\\b(?:do not|don't|never|stop|cease) (?:follow|following|obey|obeying|adhere to|adhering to) (?:${QUALIFIER} ){1,3}${TARGET}\\b`, 'g'), check: (s) => POINTING.test(s) },
  { needles: ['your new', 'your real', 'your actual', 'your true', 'your updated'], category: 'instruction_override', re: /\byour (?:new|real|actual|true|updated) (?:instructions|task|rules|orders|objective) (?:are|is|will be)\b/g },
  { needles: ['dan', 'stan', 'aim', 'dude', 'unrestricted', 'unfiltered', 'uncensored', 'jailbr', 'unaligned', 'amoral', 'evil'], category: 'role_override', re: /\byou are (?:now |going to be |henceforth )?(?:dan|stan|aim|dude|an? (?:unrestricted|unfiltered|uncensored|jailbroken|unaligned|amoral|evil) (?:ai|model|assistant|chatbot|llm|version))\b/g },
  { needles: ['unrestricted', 'unfiltered', 'uncensored', 'jailbr', 'unaligned', 'amoral', 'evil'], category: 'role_override', re: /\b(?:act|behave|respond|answer|pretend|roleplay|role-play) (?:as|like) (?:if you (?:are|were) )?(?:an? )?(?:unrestricted|unfiltered|uncensored|jailbroken|unaligned|amoral|evil) (?:ai|model|assistant|chatbot|llm|character)\b/g },
  { needles: ['pretend'], category: 'role_override', re: /\bpretend (?:that )?you (?:are|have|had) (?:not |no )(?:bound by )?(?:any )?(?:rules|restrictions|guidelines|filters|limits|limitations|content policy|policies)\b/g },
  { needles: ['no longer'], category: 'role_override', re: /\byou (?:are|will be|were) no longer (?:bound|restricted|limited|constrained|governed) by\b/g },
  { needles: ['dan mode', 'developer mode', 'god mode', 'jailbreak mode', 'jailbroken mode', 'unrestricted mode', 'unfiltered mode', 'anything now'], category: 'role_override', re: /\b(?:enable|activate|enter|switch to|turn on) (?:dan|developer|god|jailbreak|jailbroken|unrestricted|unfiltered) mode\b|\b(?:developer|dan|jailbreak|god) mode (?:enabled|activated|on)\b|\bdo anything now\b/g },
  { needles: ['new system', 'updated system', 'revised system', 'override system', 'real system', 'system override', 'system prompt', 'system message'], category: 'system_prompt_override', re: /\b(?:new|updated|revised|override|real) system (?:prompt|message|instructions?)(?= ?:| is\b| are\b| follows?\b| below\b)|\bsystem (?:prompt )?override\b|\b(?:begin|start) (?:of )?(?:new )?system (?:prompt|message)\b/g },
  { needles: ['<|', 'inst]', '<<', '##'], category: 'system_prompt_override', re: /<\|(?:im_start|im_end|system|endoftext|start_header_id|eot_id)\|>|\[\/?inst\]|<<\/?sys>>|(?:^| )#{2,3} ?(?:system|instruction|instructions) ?:/g },
  {
    category: 'prompt_exfiltration',
    needles: ['system prompt', 'system message', 'system instructions', 'initial prompt', 'initial instructions', 'hidden prompt', 'hidden instructions', 'original prompt', 'original instructions', 'secret prompt', 'secret instructions', 'developer prompt', 'developer instructions', 'instructions you were given', 'prompt above', 'words above', 'text above'],
    re: /\b(?:reveal|show|print|repeat|output|display|dump|leak|tell|give|share|write out|recite|disclose|spell out)(?: me| us)? (?:(?:the|your|all|of|full|entire|exact|complete|hidden|secret|original|initial|verbatim|whole) ){0,4}(?:system prompt|system message|(?:initial|hidden|original|secret|system|developer) (?:prompt|instructions)|instructions you were given|prompt above|words above|text above)\b/g,
  },
  { needles: ['system prompt', 'system message', 'system instructions', 'initial prompt', 'initial instructions', 'hidden prompt', 'hidden instructions', 'original prompt', 'original instructions', 'secret prompt', 'secret instructions', 'developer prompt', 'developer instructions', 'instructions you were given', 'prompt above', 'words above', 'text above'], category: 'prompt_exfiltration', re: /\bwhat (?:is|are|were|was) (?:your|the) (?:system prompt|(?:initial|original|hidden|secret|developer|system) (?:prompt|instructions))\b/g },
  { needles: ['<!--', 'hidden instruction', 'secret instruction'], category: 'hidden_instruction', re: /<!-- ?(?:ai|assistant|llm|chatgpt|claude|gpt|system|instructions?|note to (?:the )?(?:ai|assistant|llm|model))\b|\b(?:hidden|secret) instructions? ?:|\[(?:hidden|secret) instructions?\]/g },
  { needles: ['note to', 'if you are', 'reading this', 'processing this', 'summarizing this', 'summarising this'], category: 'hidden_instruction', re: /\bnote to (?:the |any )?(?:ai|assistant|llm|model|language model|chatbot)s?\b|\bif you are an? (?:ai|llm|language model|ai assistant|assistant|chatbot)(?: model)? (?:reading|processing|summari[sz]ing|seeing) this\b|\b(?:ai|llm) (?:assistants?|agents?|models?) (?:reading|processing|summari[sz]ing) this (?:document|email|page|text|message)\b/g },
];

/**
 * Every word some pattern needs, found in one pass: a pattern none of whose words occur is not run. A needle
 * that starts with a letter starts a word wherever a match holds it (the patterns begin at a word boundary and
 * put a space before each later word), so only word starts are tried; the few that start with a sign
 * (`<|`, `<<`, `##`, `<!--`) are looked for anywhere.
 */
const NEEDLE_LIST = [...new Set(PATTERNS.flatMap((p) => p.needles))];
const WORD_NEEDLES = NEEDLE_LIST.filter((n) => /^[a-z]/.test(n));
const SIGN_NEEDLES = NEEDLE_LIST.filter((n) => !/^[a-z]/.test(n));
const NEEDLES = new RegExp(`(?<![a-z0-9_])${trieSource(WORD_NEEDLES)}`, 'g');
/** The needles a matched needle starts with (the trie matches the longest one at a position). */
const PREFIXES = new Map(WORD_NEEDLES.map((n) => [n, WORD_NEEDLES.filter((m) => n.startsWith(m))]));

/** Where each needle occurs in the folded text `t`. */
function needlesIn(t: string): Map<string, number[]> {
  const at = new Map<string, number[]>();
  const put = (n: string, i: number) => (at.get(n) ?? at.set(n, []).get(n)!).push(i);
  NEEDLES.lastIndex = 0;
  for (let m = NEEDLES.exec(t); m; m = NEEDLES.exec(t)) {
    for (const n of PREFIXES.get(m[0])!) put(n, m.index);
    NEEDLES.lastIndex = m.index + 1; // needles may overlap
  }
  for (const n of SIGN_NEEDLES) for (let i = t.indexOf(n); i >= 0; i = t.indexOf(n, i + 1)) put(n, i);
  return at;
}

/** Invisible carriers, matched in the original text: runs of zero-width characters, Unicode tag characters. */
const ZERO_WIDTH = /[\u200b-\u200f\u2060-\u2064\ufeff]{3}/g;
const isZeroWidth = (c: number) => (c >= 0x200b && c <= 0x200f) || (c >= 0x2060 && c <= 0x2064) || c === 0xfeff;
const TAGS = /(?:\udb40[\udc00-\udc7f]){2}/g;
const isTagUnit = (c: number) => c === 0xdb40 || (c >= 0xdc00 && c <= 0xdc7f);

/** Longest phrase any pattern above matches, in original characters (folded text is at most this long). */
const MAX_SPAN = 160;

export function injectionDetector(): Detector {
  return {
    type: 'prompt_injection',
    key: 'prompt_injection',
    maxSpan: MAX_SPAN,
    find(text) {
      const out: Match[] = [];
      const v = foldedView(text);
      const t = v.text;
      const at = needlesIn(t);
      if (at.size) {
        for (const p of PATTERNS) {
          // Every match holds one of the pattern's needles and is shorter than MAX_SPAN: it runs on the text
          // around their occurrences only, each window starting and ending at a space (so \b reads alike).
          let positions: number[] | null = null;
          let merged = false;
          for (const n of p.needles) {
            const found = at.get(n);
            if (!found) continue;
            merged = positions !== null;
            positions = positions ? positions.concat(found) : found;
          }
          if (!positions) continue; // cannot match: no word it needs occurs
          if (merged) positions.sort((a, b) => a - b); // each needle's own list is in order
          const windows: Array<[number, number]> = [];
          let covered = 0;
          for (const pos of positions) {
            const s = pos <= MAX_SPAN ? 0 : t.lastIndexOf(' ', pos - MAX_SPAN) + 1;
            const after = t.indexOf(' ', Math.min(t.length, pos + MAX_SPAN));
            const e = after < 0 ? t.length : after;
            const last = windows[windows.length - 1];
            if (last && s <= last[1]) {
              covered += Math.max(0, e - last[1]);
              last[1] = Math.max(last[1], e);
            } else {
              windows.push([s, e]);
              covered += e - s;
            }
          }
          // Windows that cover most of the text: the text in one run is cheaper than slicing it.
          for (const [ws, we] of covered > t.length / 2 ? [[0, t.length] as [number, number]] : windows) {
            const part = ws === 0 && we === t.length ? t : t.slice(ws, we);
            eachMatch(p.re, part, (m) => {
              if (p.check && !p.check(m[0])) return null;
              const [start, end] = originalSpan(v, ws + m.index, ws + m.index + m[0].length);
              return { start, end, category: p.category, severity: INJECTION_SEVERITY[p.category] };
            }, out);
          }
        }
      }
      if (!v.ascii && /[\u200b-\u200f\u2060-\u2064\ufeff\udb40]/.test(text)) {
        for (const [re, tail] of [[ZERO_WIDTH, isZeroWidth], [TAGS, isTagUnit]] as const) {
          eachMatch(re, text, (m) => {
            let end = m.index + m[0].length;
            while (end < text.length && tail(text.charCodeAt(end))) end++;
            re.lastIndex = end;
            return { start: m.index, end, category: 'hidden_instruction', severity: INJECTION_SEVERITY.hidden_instruction, tail };
          }, out);
        }
      }
      return ordered(out);
    },
  };
}

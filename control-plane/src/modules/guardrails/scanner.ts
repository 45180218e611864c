import { ACTION_RANK, type Action, type Detector, type Direction, type Match, type Severity } from './types.ts';

/** One detector of one rule set, with the action its rule set takes on one direction. */
export interface RuleEntry {
  /** `<rule set id>/<detector type>`, as findings name it. */
  rule: string;
  detector: Detector;
  action: Action;
}

/** A span of text that one or more detectors matched (overlapping matches merged), with the action that wins. */
export interface Hit {
  start: number;
  end: number;
  /** The category of the earliest (then longest) match: what the placeholder names. */
  category: string;
  action: Action;
  /** Every rule entry that matched inside the span, with its category. */
  parts: Array<{ entry: RuleEntry; category: string; severity: Severity }>;
  /** See Match: the span runs on in a stream (the last merged match's). */
  tail?: Match['tail'];
  until?: Match['until'];
}

export type Mode = 'enforce' | 'monitor' | 'off';
export type Decision = 'allowed' | 'redacted' | 'blocked' | 'would_redact' | 'would_block';

export const placeholder = (category: string) => `[REDACTED:${category}]`;

/** What happens to a hit's text in a mode. */
export function decisionOf(action: Action, mode: Mode): Decision {
  if (action === 'allow') return 'allowed';
  if (mode === 'enforce') return action === 'redact' ? 'redacted' : 'blocked';
  return action === 'redact' ? 'would_redact' : 'would_block';
}

/**
 * The detectors of one direction of a policy's rule sets. Each distinct detector configuration runs once per
 * text, whatever number of rule sets use it; its matches count for each of them.
 */
export class DirectionPlan {
  readonly detectors: Detector[];
  private readonly entriesOf = new Map<Detector, RuleEntry[]>();
  /** What a stream holds back: the longest span any detector must see at once, and a margin for boundaries. */
  readonly holdback: number;
  /** Some entry redacts or blocks (otherwise a stream need not hold anything back). */
  readonly rewrites: boolean;

  constructor(readonly entries: readonly RuleEntry[]) {
    const byKey = new Map<string, Detector>();
    for (const e of entries) {
      const d = byKey.get(e.detector.key) ?? e.detector;
      byKey.set(d.key, d);
      const list = this.entriesOf.get(d) ?? [];
      list.push(e);
      this.entriesOf.set(d, list);
    }
    this.detectors = [...byKey.values()];
    this.holdback = Math.max(0, ...this.detectors.map((d) => d.maxSpan)) + 2;
    this.rewrites = entries.some((e) => e.action !== 'allow');
  }

  /** Every hit in `text`, ordered, not overlapping. */
  scan(text: string): Hit[] {
    const tagged: Array<{ m: Match; d: Detector }> = [];
    for (const d of this.detectors) for (const m of d.find(text)) tagged.push({ m, d });
    if (tagged.length === 0) return [];
    if (tagged.length > 1) tagged.sort((a, b) => a.m.start - b.m.start || b.m.end - a.m.end);
    const hits: Hit[] = [];
    let cur: Hit | null = null;
    for (const { m, d } of tagged) {
      const entries = this.entriesOf.get(d)!;
      if (cur && m.start < cur.end) {
        if (m.end > cur.end) {
          cur.end = m.end;
          cur.tail = m.tail;
          cur.until = m.until;
        }
      } else {
        cur = { start: m.start, end: m.end, category: m.category, action: 'allow', parts: [], tail: m.tail, until: m.until };
        hits.push(cur);
      }
      for (const entry of entries) {
        cur.parts.push({ entry, category: m.category, severity: m.severity });
        if (ACTION_RANK[entry.action] > ACTION_RANK[cur.action]) cur.action = entry.action;
      }
    }
    return hits;
  }
}

export interface Finding {
  rule: string;
  direction: Direction;
  category: string;
  count: number;
  severity: Severity;
  action: Action;
  decision: Decision;
}

const DECISION_INDEX: Record<Decision, number> = { allowed: 0, redacted: 1, blocked: 2, would_redact: 3, would_block: 4 };
/** The part of a finding's identity its rule entry gives: the rule and its action (two entries may share it). */
const entryKeys = new WeakMap<RuleEntry, string>();
const entryKey = (e: RuleEntry) => {
  let k = entryKeys.get(e);
  if (k === undefined) entryKeys.set(e, (k = `${e.rule}\u0000${e.action}`));
  return k;
};

/** Findings of one request, counted per rule, direction, category, action and decision. Never any text. */
export class FindingsLog {
  /** Rule and action → category → one finding per direction and decision. */
  private readonly slots = new Map<string, Map<string, Array<Finding | undefined>>>();
  private readonly all: Finding[] = [];
  /** The first hit that blocked (enforce mode), for the refusal. */
  blockedBy: Finding | null = null;

  constructor(readonly mode: Mode) {}

  add(direction: Direction, hit: Hit): void {
    const decision = decisionOf(hit.action, this.mode);
    const at = (direction === 'input' ? 0 : 5) + DECISION_INDEX[decision];
    const seen = hit.parts.length > 1 ? new Set<Finding>() : null;
    let blocking: Finding | null = null;
    for (const p of hit.parts) {
      const ek = entryKey(p.entry);
      let cats = this.slots.get(ek);
      if (!cats) this.slots.set(ek, (cats = new Map()));
      let list = cats.get(p.category);
      if (!list) cats.set(p.category, (list = []));
      let f = list[at];
      if (f) {
        if (seen) {
          if (seen.has(f)) continue; // one hit counts once for each rule, however many of its matches merged
          seen.add(f);
        }
        f.count++;
      } else {
        f = { rule: p.entry.rule, direction, category: p.category, count: 1, severity: p.severity, action: p.entry.action, decision };
        list[at] = f;
        this.all.push(f);
        seen?.add(f);
      }
      if (!blocking && p.entry.action === 'block') blocking = f;
    }
    if (decision === 'blocked' && !this.blockedBy) this.blockedBy = blocking ?? this.findingOf(hit.parts[0]!, at);
  }

  private findingOf(p: Hit['parts'][number], at: number): Finding | null {
    return this.slots.get(entryKey(p.entry))?.get(p.category)?.[at] ?? null;
  }

  get size(): number {
    return this.all.length;
  }

  /** In a stable order (rule, direction, category), for the receipt. */
  list(): Finding[] {
    return [...this.all].sort((a, b) => (a.rule < b.rule ? -1 : a.rule > b.rule ? 1 : a.direction < b.direction ? -1 : a.direction > b.direction ? 1 : a.category < b.category ? -1 : a.category > b.category ? 1 : 0));
  }
}

/**
 * Scans a whole text: records every hit, and returns the text as it goes on (redacted where a hit redacts, in
 * enforce mode; unchanged otherwise) and whether a hit blocks it.
 */
export function scanText(plan: DirectionPlan, text: string, direction: Direction, log: FindingsLog): { text: string; blocked: boolean } {
  const hits = plan.scan(text);
  if (hits.length === 0) return { text, blocked: false };
  let out = '';
  let pos = 0;
  let blocked = false;
  for (const h of hits) {
    log.add(direction, h);
    if (log.mode !== 'enforce' || h.action === 'allow') continue;
    if (h.action === 'block') blocked = true;
    out += text.slice(pos, h.start) + placeholder(h.category);
    pos = h.end;
  }
  return { text: pos === 0 ? text : out + text.slice(pos), blocked };
}

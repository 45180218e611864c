import { appendFileSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SettleJournal } from './settle-journal.ts';

const dir = () => mkdtempSync(join(tmpdir(), 'svc-journal-unit-'));

describe('settle journal', () => {
  it('deletes a segment once every settle in it committed and a newer one is written', () => {
    const d = dir();
    const j = new SettleJournal<{ n: number }>(d, 2);
    const a = j.append({ n: 1 });
    const b = j.append({ n: 2 });
    expect(a).toBe(b);
    const c = j.append({ n: 3 }); // the first segment is full: a second one
    expect(c).not.toBe(a);
    expect(readdirSync(d).sort()).toEqual([a, c].sort());
    j.done(a);
    expect(readdirSync(d)).toHaveLength(2); // one settle of the first segment still waits
    j.done(b);
    expect(readdirSync(d)).toEqual([c]);
    j.done(c);
    expect(j.pending).toBe(false);
    j.close();
    expect(readdirSync(d)).toEqual([]);
  });

  it("recovers a closed journal's uncommitted settles, never a live journal's, and skips a line cut short", () => {
    const d = dir();
    const dead = new SettleJournal<{ n: number }>(d);
    const seg = dead.append({ n: 1 });
    dead.append({ n: 2 });
    dead.done(seg); // n=1 committed; n=2 did not
    dead.close(); // as if the process stopped with n=2 still waiting: the segment stays
    appendFileSync(join(d, seg), '{"n": 3'); // a write the crash cut short
    const live = new SettleJournal<{ n: number }>(d);
    live.append({ n: 9 });
    const other = new SettleJournal<{ n: number }>(d);
    const found = other.recover();
    // Replay gives every line of the dead segment; the database skips those already stored (n=1).
    expect(found.items).toEqual([{ n: 1 }, { n: 2 }]);
    expect(found.files).toEqual([seg]);
    other.discard(found.files);
    expect(readdirSync(d).some((f) => f === seg)).toBe(false);
    live.close();
    other.close();
  });
});

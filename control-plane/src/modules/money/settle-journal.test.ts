import { appendFileSync, closeSync, mkdtempSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SettleJournal } from './settle-journal.ts';

const dir = () => mkdtempSync(join(tmpdir(), 'svc-journal-unit-'));
const lines = (d: string, seg: string) => readFileSync(join(d, seg), 'utf8').split('\n').filter(Boolean);
/** This process's open descriptor of `path`. */
const descriptorOf = (path: string) =>
  readdirSync('/proc/self/fd').map(Number).find((f) => {
    try {
      return readlinkSync(`/proc/self/fd/${f}`) === path;
    } catch {
      return false;
    }
  })!;

describe('settle journal', () => {
  it('deletes a segment once every settle in it committed and a newer one is written', async () => {
    const d = dir();
    const j = new SettleJournal<{ n: number }>(d, 2);
    const a = await j.append({ n: 1 });
    const b = await j.append({ n: 2 });
    expect(a).toBe(b);
    const c = await j.append({ n: 3 }); // the first segment is full: a second one
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

  it('writes the settles of one turn together, across a full segment, each resolving once its line is on file', async () => {
    const d = dir();
    const j = new SettleJournal<{ n: number }>(d, 3);
    const appended = [1, 2, 3, 4, 5].map((n) => j.append({ n }));
    expect(readdirSync(d)).toEqual([]); // nothing written before the turn ends
    const segs = await Promise.all(appended);
    expect(new Set(segs).size).toBe(2);
    expect(lines(d, segs[0]!).map((l) => JSON.parse(l))).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    expect(lines(d, segs[4]!).map((l) => JSON.parse(l))).toEqual([{ n: 4 }, { n: 5 }]);
    j.close();
  });

  it('a write that fails rejects its settles, counts none of them, and the next ones go to a new segment', async () => {
    const d = dir();
    const j = new SettleJournal<{ n: number }>(d);
    const first = await j.append({ n: 1 });
    // The segment's descriptor goes away under the journal: its next write fails (EBADF).
    const fd = descriptorOf(join(d, first));
    closeSync(fd);
    await expect(Promise.all([j.append({ n: 2 }), j.append({ n: 3 })])).rejects.toMatchObject({ code: 'EBADF' });
    const next = await j.append({ n: 4 });
    expect(next).not.toBe(first);
    expect(lines(d, next)).toEqual(['{"n":4}']);
    j.done(first);
    j.done(next);
    expect(j.pending).toBe(false); // the failed settles were never counted as waiting
  });

  it('appendNow writes its line (and those waiting for the turn to end) before it returns; a failed write throws', async () => {
    const d = dir();
    const j = new SettleJournal<{ n: number }>(d);
    const waiting = j.append({ n: 1 });
    const seg = j.appendNow('{"n":2}');
    expect(lines(d, seg)).toEqual(['{"n":1}', '{"n":2}']); // on file already, in the order appended
    expect(await waiting).toBe(seg);
    const fd = descriptorOf(join(d, seg));
    closeSync(fd);
    expect(() => j.appendNow('{"n":3}')).toThrow(expect.objectContaining({ code: 'EBADF' }));
    const next = j.appendNow('{"n":4}');
    expect(next).not.toBe(seg);
    expect(lines(d, next)).toEqual(['{"n":4}']);
    j.done(seg);
    j.done(seg);
    j.done(next);
    expect(j.pending).toBe(false);
    j.close();
  });

  it("recovers a closed journal's uncommitted settles, never a live journal's, and skips a line cut short", async () => {
    const d = dir();
    const dead = new SettleJournal<{ n: number }>(d);
    const seg = await dead.append({ n: 1 });
    await dead.append({ n: 2 });
    dead.done(seg); // n=1 committed; n=2 did not
    dead.close(); // as if the process stopped with n=2 still waiting: the segment stays
    appendFileSync(join(d, seg), '{"n": 3'); // a write the crash cut short
    const live = new SettleJournal<{ n: number }>(d);
    await live.append({ n: 9 });
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

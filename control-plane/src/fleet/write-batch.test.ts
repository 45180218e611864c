import { describe, expect, it } from 'vitest';
import { WriteBatch } from './write-batch.ts';

/** A write whose statements the test commits (or fails) one at a time, recording what each carried. */
function manualWrite() {
  const statements: Array<{ items: Array<{ key: string; value: number }>; commit: () => void; fail: (e: Error) => void }> = [];
  const write = (items: Array<{ key: string; value: number }>) =>
    new Promise<Map<string, string>>((resolve, reject) => {
      statements.push({ items, commit: () => resolve(new Map(items.filter((i) => i.key !== 'gone').map((i) => [i.key, `${i.key}=${i.value}`]))), fail: reject });
    });
  return { statements, write };
}
const tick = () => new Promise((r) => setImmediate(r));

describe('writes gathered while the previous statement commits', () => {
  it('writes one item alone, at once', async () => {
    const m = manualWrite();
    const b = new WriteBatch(m.write, (k) => new Error(`no ${k}`));
    const a = b.add('a', 1);
    await tick();
    expect(m.statements.map((s) => s.items)).toEqual([[{ key: 'a', value: 1 }]]);
    m.statements[0]!.commit();
    expect(await a).toBe('a=1');
  });

  it('sends what came during a statement together in the next one, and answers each caller', async () => {
    const m = manualWrite();
    const b = new WriteBatch(m.write, (k) => new Error(`no ${k}`));
    const first = b.add('a', 1);
    await tick();
    const more = [b.add('b', 1), b.add('c', 1), b.add('d', 1)];
    await tick();
    expect(m.statements).toHaveLength(1); // the second statement waits for the first to commit
    m.statements[0]!.commit();
    await first;
    await tick();
    expect(m.statements).toHaveLength(2);
    expect(m.statements[1]!.items.map((i) => i.key)).toEqual(['b', 'c', 'd']);
    m.statements[1]!.commit();
    expect(await Promise.all(more)).toEqual(['b=1', 'c=1', 'd=1']);
    expect(b.counts).toEqual({ statements: 2, items: 4 });
  });

  it('writes a key once per statement, its latest value, and answers all of its callers with it', async () => {
    const m = manualWrite();
    const b = new WriteBatch(m.write, (k) => new Error(`no ${k}`));
    const x = b.add('a', 1);
    const y = b.add('a', 2);
    await tick();
    expect(m.statements[0]!.items).toEqual([{ key: 'a', value: 2 }]);
    m.statements[0]!.commit();
    expect([await x, await y]).toEqual(['a=2', 'a=2']);
  });

  it('fails the items of a failed statement only, and goes on with the next', async () => {
    const m = manualWrite();
    const b = new WriteBatch(m.write, (k) => new Error(`no ${k}`));
    const a = b.add('a', 1);
    await tick();
    const c = b.add('c', 1);
    m.statements[0]!.fail(new Error('connection lost'));
    await expect(a).rejects.toThrow('connection lost');
    await tick();
    m.statements[1]!.commit();
    expect(await c).toBe('c=1');
    await b.idle();
  });

  it('refuses a key the statement did not answer for, and splits a round at its largest size', async () => {
    const m = manualWrite();
    const b = new WriteBatch(m.write, (k) => new Error(`no ${k}`), 2);
    const all = ['gone', 'b', 'c'].map((k) => b.add(k, 1));
    await tick();
    expect(m.statements[0]!.items.map((i) => i.key)).toEqual(['gone', 'b']);
    m.statements[0]!.commit();
    await expect(all[0]).rejects.toThrow('no gone');
    await tick();
    expect(m.statements[1]!.items.map((i) => i.key)).toEqual(['c']);
    m.statements[1]!.commit();
    expect(await all[2]).toBe('c=1');
  });
});

import { describe, expect, it } from '@jest/globals';
import { MicroBatcher } from '../src/batching/micro-batcher.js';

/** A flush that records the batches it was given and can refuse a poisoned item, all or nothing. */
function recordingFlush(poisoned = new Set<string>()) {
  const batches: string[][] = [];
  const flush = async (items: string[]): Promise<string[]> => {
    batches.push([...items]);
    await new Promise((resolve) => setTimeout(resolve, 5));
    if (items.some((item) => poisoned.has(item))) throw new Error('refused');
    return items.map((item) => `done:${item}`);
  };
  return { batches, flush };
}

describe('the micro-batcher that pays a claim, a record or a fan-out per batch', () => {
  it('hands every item submitted in one turn of the event loop to one flush and answers each its own result', async () => {
    const { batches, flush } = recordingFlush();
    const batcher = new MicroBatcher(flush, { maxBatch: 100, maxInFlight: 2, key: (item) => item });

    const results = await Promise.all(['a', 'b', 'c'].map((item) => batcher.submit(item)));

    expect(results).toEqual(['done:a', 'done:b', 'done:c']);
    expect(batches).toEqual([['a', 'b', 'c']]);
  });

  it('never puts two items with the same key in one batch, and never more than maxBatch', async () => {
    const { batches, flush } = recordingFlush();
    const batcher = new MicroBatcher(flush, { maxBatch: 2, maxInFlight: 1, key: (item) => item.split('#')[0] as string });

    const results = await Promise.all(['x#1', 'x#2', 'y', 'z'].map((item) => batcher.submit(item)));

    expect(results).toEqual(['done:x#1', 'done:x#2', 'done:y', 'done:z']);
    expect(batches.every((batch) => batch.length <= 2)).toBe(true);
    expect(batches.every((batch) => new Set(batch.map((item) => item.split('#')[0])).size === batch.length)).toBe(true);
    expect(batches.flat().sort()).toEqual(['x#1', 'x#2', 'y', 'z']);
  });

  it('lets items without a key share any batch, keeping apart only those whose keys are equal', async () => {
    const { batches, flush } = recordingFlush();
    // Only the `scan:` items have a key (as a producer batch keys scan completions by scan).
    const batcher = new MicroBatcher(flush, { maxBatch: 10, maxInFlight: 1, key: (item) => (item.startsWith('scan:') ? item.split('#')[0] : undefined) });

    const results = await Promise.all(['deploy', 'deploy', 'scan:1#a', 'scan:1#b', 'run', 'scan:2'].map((item) => batcher.submit(item)));

    expect(results).toEqual(['done:deploy', 'done:deploy', 'done:scan:1#a', 'done:scan:1#b', 'done:run', 'done:scan:2']);
    expect(batches).toEqual([['deploy', 'deploy', 'scan:1#a', 'run', 'scan:2'], ['scan:1#b']]);
  });

  it('never has two items with one key on the wire at once, even with room for another flush: the later waits for the first to settle', async () => {
    const { batches, flush } = recordingFlush();
    const settledAt: Record<string, number> = {};
    const startedAt: Record<string, number> = {};
    let clock = 0;
    const timed = async (items: string[]) => {
      for (const item of items) startedAt[item] = clock++;
      const results = await flush(items);
      for (const item of items) settledAt[item] = clock++;
      return results;
    };
    const batcher = new MicroBatcher(timed, { maxBatch: 10, maxInFlight: 2, key: (item) => item.split('#')[0] });

    const results = await Promise.all(['scan:1#a', 'run', 'scan:1#b', 'scan:2'].map((item) => batcher.submit(item)));

    expect(results).toEqual(['done:scan:1#a', 'done:run', 'done:scan:1#b', 'done:scan:2']);
    expect(batches).toEqual([['scan:1#a', 'run', 'scan:2'], ['scan:1#b']]);
    expect(startedAt['scan:1#b']!).toBeGreaterThan(settledAt['scan:1#a']!);
  });

  it('flushes again item by item when a batch is refused, so only the poisoned item fails', async () => {
    const { batches, flush } = recordingFlush(new Set(['bad']));
    const batcher = new MicroBatcher(flush, { maxBatch: 100, maxInFlight: 2 });

    const settled = await Promise.allSettled(['a', 'bad', 'c'].map((item) => batcher.submit(item)));

    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(settled.filter((s) => s.status === 'fulfilled').map((s) => (s as PromiseFulfilledResult<string>).value)).toEqual(['done:a', 'done:c']);
    expect((settled[1] as PromiseRejectedResult).reason).toEqual(new Error('refused'));
    expect(batches).toEqual([['a', 'bad', 'c'], ['a'], ['bad'], ['c']]);
  });

  it('keeps at most maxInFlight flushes on the wire; items submitted meanwhile form the next batch', async () => {
    const { batches, flush } = recordingFlush();
    const batcher = new MicroBatcher(flush, { maxBatch: 100, maxInFlight: 1 });

    const first = batcher.submit('a');
    await new Promise((resolve) => setImmediate(resolve));
    const later = ['b', 'c', 'd'].map((item) => batcher.submit(item));
    await Promise.all([first, ...later]);

    expect(batches).toEqual([['a'], ['b', 'c', 'd']]);
  });
});

import { describe, expect, it } from '@jest/globals';
import { ShardBudget } from '../src/processors/shard-budget.js';

/** A worker as BullMQ runs one: it takes a job while it holds fewer than its concurrency. */
function workersOf(shards: number) {
  return Array.from({ length: shards }, () => ({ concurrency: 1 }));
}

/** Starts a job on shard `shard` that ends when the returned function is called. */
function hold(budget: ShardBudget, shard: number): () => Promise<void> {
  let end!: () => void;
  const running = budget.track(shard, () => new Promise<void>((resolve) => (end = resolve)))();
  return async () => {
    end();
    await running;
  };
}

describe('the job budget a dispatcher shares among its shard workers', () => {
  it('gives one shard the whole budget, as one worker had before there were shards', () => {
    const budget = new ShardBudget(221, 1);
    const [worker] = workersOf(1) as [{ concurrency: number }];
    budget.attach([worker]);
    expect(worker.concurrency).toBe(221);
  });

  it('splits an idle budget evenly, and never lets the workers together take more than the budget and one job per shard', async () => {
    const budget = new ShardBudget(221, 3);
    const workers = workersOf(3);
    budget.attach(workers);
    expect(workers.map((w) => w.concurrency)).toEqual([74, 74, 74]);
    // Every worker takes jobs while it may, in turns, as three busy shards would.
    const ends: Array<() => Promise<void>> = [];
    const held = [0, 0, 0];
    for (let turn = 0; turn < 400; turn++) {
      const shard = turn % 3;
      if (held[shard]! < workers[shard]!.concurrency) {
        ends.push(hold(budget, shard));
        held[shard]!++;
      }
    }
    expect(held.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(221 + 3);
    expect(Math.min(...held)).toBeGreaterThanOrEqual(73);
    await Promise.all(ends.map((end) => end()));
    expect(workers.map((w) => w.concurrency)).toEqual([74, 74, 74]);
  });

  it('lets a lone busy shard grow to the whole budget, and gives the others room again as its jobs end', async () => {
    const budget = new ShardBudget(221, 3);
    const workers = workersOf(3);
    budget.attach(workers);
    const ends: Array<() => Promise<void>> = [];
    while (ends.length < workers[1]!.concurrency) ends.push(hold(budget, 1));
    expect(ends.length).toBe(221);
    // Idle shards can still take a job each: another account's attempt is never stuck behind it.
    expect(workers[0]!.concurrency).toBe(1);
    expect(workers[2]!.concurrency).toBe(1);
    await Promise.all(ends.splice(0, 100).map((end) => end()));
    expect(workers[0]!.concurrency).toBe(34);
    expect(workers[1]!.concurrency).toBe(121 + 34);
    await Promise.all(ends.map((end) => end()));
    expect(workers.map((w) => w.concurrency)).toEqual([74, 74, 74]);
  });
});

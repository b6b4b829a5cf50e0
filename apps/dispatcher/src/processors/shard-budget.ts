/** What ShardBudget needs of a worker: BullMQ reads `concurrency` before each fetch, so it can change while it runs. */
export interface BudgetedWorker {
  concurrency: number;
}

/**
 * One budget of jobs for a dispatcher's delivery workers, one worker per queue shard. A worker may
 * hold the jobs it has plus an equal part of what the process has left, so the workers together
 * hold at most the budget and one job per shard more: a busy shard grows to the whole budget while
 * the others are idle, and no worker takes jobs the slots would only send back (each worker allowed
 * the whole budget, three shards held three budgets' worth, and the surplus went back to the
 * queue and was taken again, over and over: 6 times per delivery, against 1.4 with one shard).
 * With one shard the worker's concurrency is the budget, as before there were shards.
 */
export class ShardBudget {
  private readonly held: number[];
  private workers: readonly BudgetedWorker[] = [];

  constructor(private readonly budget: number, shards: number) {
    this.held = Array.from({ length: shards }, () => 0);
  }

  /** The workers, shard k at index k; each gets its concurrency now. */
  attach(workers: readonly BudgetedWorker[]): void {
    this.workers = workers;
    this.rebalance();
  }

  /** Wraps shard `shard`'s processor so the jobs it holds count against the budget. */
  track<A extends unknown[], R>(shard: number, process: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
    return async (...args) => {
      this.held[shard] = (this.held[shard] ?? 0) + 1;
      this.rebalance();
      try {
        return await process(...args);
      } finally {
        this.held[shard] = (this.held[shard] ?? 1) - 1;
        this.rebalance();
      }
    };
  }

  /** The concurrency shard `shard`'s worker may have now. */
  concurrencyOf(shard: number): number {
    const held = this.held.reduce((sum, n) => sum + n, 0);
    const share = Math.ceil(Math.max(0, this.budget - held) / this.held.length);
    return Math.max(1, (this.held[shard] ?? 0) + share);
  }

  private rebalance(): void {
    this.workers.forEach((worker, shard) => {
      worker.concurrency = this.concurrencyOf(shard);
    });
  }
}

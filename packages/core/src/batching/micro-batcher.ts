/**
 * Collects the calls made while the event loop turns (and while a previous flush is on the
 * wire) and hands them to one `flush` call, so a round trip and a commit are paid per batch,
 * not per item. `flush` answers one result per item, in order. `flush` must be all or nothing
 * (one transaction): if a batch of several items throws, each item is flushed again alone, so
 * one item Postgres refuses (a poisoned id, bytes it cannot store) fails only itself.
 *
 * Two items with the same key never share a batch (one UPDATE … FROM cannot move one row
 * twice), nor are they on the wire at once: the second waits until the batch holding the first
 * has settled, so items with one key reach the database in the order they were submitted (with
 * two batches in flight, the later batch could otherwise take the row's lock first).
 */
export interface MicroBatcherOptions<I> {
  maxBatch: number;
  /** Flushes on the wire at once; more items wait and form the next batch. */
  maxInFlight: number;
  /** Items with the same key never share a batch; undefined: no such constraint on the item. */
  key?: (item: I) => string | undefined;
}

interface Pending<I, O> {
  item: I;
  resolve: (value: O) => void;
  reject: (error: unknown) => void;
}

type Settled<O> = { ok: true; value: O } | { ok: false; error: unknown };

export class MicroBatcher<I, O> {
  private queue: Array<Pending<I, O>> = [];
  private inFlight = 0;
  private scheduled = false;
  /** The keys of the items in the batches on the wire. */
  private readonly keysInFlight = new Set<string>();
  /** Since when items have waited without a flush succeeding (meaningful while any waits). */
  private progressAt = 0;

  constructor(
    private readonly flush: (items: I[]) => Promise<O[]>,
    private readonly options: MicroBatcherOptions<I>,
  ) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      if (this.queue.length === 0 && this.inFlight === 0) this.progressAt = Date.now();
      this.queue.push({ item, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.options.maxInFlight || this.queue.length === 0) return;
    this.scheduled = true;
    // setImmediate: every job that a worker picked up in this turn of the loop joins the batch.
    setImmediate(() => {
      this.scheduled = false;
      this.run();
    });
  }

  private run(): void {
    if (this.inFlight >= this.options.maxInFlight || this.queue.length === 0) return;
    const batch = this.take();
    // Every waiting item's key is on the wire: the batch holding it schedules again when it settles.
    if (batch.length === 0) return;
    const keys = this.keysOf(batch);
    for (const k of keys) this.keysInFlight.add(k);
    this.inFlight += 1;
    this.flushSplittingOnError(batch.map((pending) => pending.item))
      .then((results) => {
        batch.forEach((pending, i) => {
          const result = results[i] as Settled<O>;
          if (result.ok) pending.resolve(result.value);
          else pending.reject(result.error);
        });
      })
      .finally(() => {
        for (const k of keys) this.keysInFlight.delete(k);
        this.inFlight -= 1;
        this.schedule();
      });
    // Room for another flush right away (a full queue): form it now.
    this.schedule();
  }

  /**
   * How long items have waited with no flush succeeding meanwhile (0 when none waits): flushes
   * that hang, or that fail one after the other, show here as a time that only grows.
   */
  stalledForMs(now = Date.now()): number {
    return this.queue.length === 0 && this.inFlight === 0 ? 0 : now - this.progressAt;
  }

  private async flushSplittingOnError(items: I[]): Promise<Array<Settled<O>>> {
    try {
      const results = await this.flush(items);
      if (results.length !== items.length) throw new Error(`batch flush answered ${results.length} results for ${items.length} items`);
      this.progressAt = Date.now();
      return results.map((value) => ({ ok: true, value }));
    } catch (error) {
      if (items.length === 1) return [{ ok: false, error }];
      return Promise.all(items.map(async (item) => (await this.flushSplittingOnError([item]))[0] as Settled<O>));
    }
  }

  private keysOf(batch: ReadonlyArray<Pending<I, O>>): string[] {
    const { key } = this.options;
    if (!key) return [];
    return batch.map((pending) => key(pending.item)).filter((k): k is string => k !== undefined);
  }

  private take(): Array<Pending<I, O>> {
    const { key, maxBatch } = this.options;
    if (!key) return this.queue.splice(0, maxBatch);
    const batch: Array<Pending<I, O>> = [];
    const rest: Array<Pending<I, O>> = [];
    const seen = new Set<string>();
    for (const pending of this.queue) {
      const k = key(pending.item);
      if (batch.length < maxBatch && (k === undefined || (!seen.has(k) && !this.keysInFlight.has(k)))) {
        if (k !== undefined) seen.add(k);
        batch.push(pending);
      } else rest.push(pending);
    }
    this.queue = rest;
    return batch;
  }
}

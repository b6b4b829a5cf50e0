/**
 * Bounds how many key lookups (requests whose key is not cached) use the database at once, so
 * that a flood of random well-formed keys, each a query, holds at most this many pool
 * connections and the rest stay free for requests with known keys. Waiters queue in memory;
 * their number is bounded by the server's open connections (apiMaxConnections).
 */
export class KeyLookupGate {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly maxConcurrent: number) {}

  /** Lookups waiting for a slot. */
  get queued(): number {
    return this.waiting.length;
  }

  async run<T>(lookup: () => Promise<T>): Promise<T> {
    if (this.active >= this.maxConcurrent) {
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.active += 1;
    }
    try {
      return await lookup();
    } finally {
      // Hand the slot straight to the next waiter, or give it back.
      const next = this.waiting.shift();
      if (next) next();
      else this.active -= 1;
    }
  }
}

/** A quarter of the pool, at least one: the share cold key lookups may hold. */
export function keyLookupConcurrency(dbPoolMax: number): number {
  return Math.max(1, Math.floor(dbPoolMax / 4));
}

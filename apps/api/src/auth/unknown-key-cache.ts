/** How long a well-formed key found in no active row is refused without asking Postgres again. */
export const UNKNOWN_KEY_CACHE_TTL_MS = 5_000;
/** The most hashes remembered as unknown; past it the oldest is forgotten first. */
export const UNKNOWN_KEY_CACHE_MAX_ENTRIES = 10_000;

/**
 * The negative cache: SHA-256 hashes of well-formed keys that matched no active key, so a client
 * repeating a wrong, old or revoked key costs one query per TTL, not one per request. A new key
 * is never hidden by it while the process hears Postgres's key-creation notifications (clear()
 * on each, and a lookup that raced with one is not remembered); when it does not, for at most
 * the TTL. Revoked keys are unaffected: this only ever says "refuse".
 */
export class UnknownKeyCache {
  private readonly expiries = new Map<string, number>();
  private generation = 0;

  constructor(
    private readonly ttlMs = UNKNOWN_KEY_CACHE_TTL_MS,
    private readonly maxEntries = UNKNOWN_KEY_CACHE_MAX_ENTRIES,
  ) {}

  /** The current generation, to pass to add() after a database read that began now. */
  currentGeneration(): number {
    return this.generation;
  }

  has(hash: string): boolean {
    const expiresAt = this.expiries.get(hash);
    if (expiresAt === undefined) return false;
    if (expiresAt > Date.now()) return true;
    this.expiries.delete(hash);
    return false;
  }

  /** Remembers a hash Postgres did not know, unless a key was created since the read began. */
  add(hash: string, readAtGeneration: number): void {
    if (readAtGeneration !== this.generation) return;
    this.expiries.delete(hash);
    if (this.expiries.size >= this.maxEntries) {
      const oldest = this.expiries.keys().next().value;
      if (oldest !== undefined) this.expiries.delete(oldest);
    }
    this.expiries.set(hash, Date.now() + this.ttlMs);
  }

  /** A key was created (or creations may have been missed): any remembered hash may now be a key. */
  clear(): void {
    this.generation += 1;
    this.expiries.clear();
  }

  get size(): number {
    return this.expiries.size;
  }
}

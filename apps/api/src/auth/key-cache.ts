import { KEY_CACHE_TTL_MS, type AuthenticatedKey } from '@svc/core';

const MAX_ENTRIES = 10_000;

interface Entry {
  key: AuthenticatedKey;
  expiresAt: number;
}

/**
 * Keys this process looked up recently, by the SHA-256 of the presented key. An entry is trusted
 * only together with the rate-limit script's revocation marker check (authenticate.ts), while
 * the process hears Postgres's revocation notifications (when a listener is wired), and never
 * while the limiter is on its per-process fallback.
 */
export class KeyCache {
  private readonly entries = new Map<string, Entry>();
  /**
   * Hashes of keys found recently whose entries expired (or were set aside while untrusted), by
   * key id: their next lookup is a re-validation and takes the lane of keys seen before
   * (authenticate.ts), never the queue of never-seen keys a flood of random keys fills.
   */
  private readonly expired = new Map<string, string>();
  private trusted = true;
  /** Moves on every invalidation, so a lookup that raced with one is not cached. */
  private generation = 0;

  constructor(private readonly ttlMs = KEY_CACHE_TTL_MS) {}

  /** The current generation, to pass to set() after a database read that began now. */
  currentGeneration(): number {
    return this.generation;
  }

  get(hash: string): AuthenticatedKey | undefined {
    if (!this.trusted) return undefined;
    const entry = this.entries.get(hash);
    if (!entry) return undefined;
    if (entry.expiresAt <= Date.now()) {
      this.entries.delete(hash);
      this.remember(hash, entry.key.id);
      return undefined;
    }
    return entry.key;
  }

  /** True when this hash was a key found here recently (its entry expired, or the cache is untrusted). */
  seenRecently(hash: string): boolean {
    return this.expired.has(hash) || this.entries.has(hash);
  }

  private remember(hash: string, keyId: string): void {
    this.expired.delete(hash);
    if (this.expired.size >= MAX_ENTRIES) {
      const oldest = this.expired.keys().next().value;
      if (oldest !== undefined) this.expired.delete(oldest);
    }
    this.expired.set(hash, keyId);
  }

  /** Caches a key read from Postgres, unless an invalidation happened since the read began. */
  set(hash: string, key: AuthenticatedKey, readAtGeneration: number): void {
    if (!this.trusted || readAtGeneration !== this.generation) return;
    if (this.entries.size >= MAX_ENTRIES) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.expired.delete(hash);
    this.entries.set(hash, { key, expiresAt: Date.now() + this.ttlMs });
  }

  delete(hash: string): void {
    this.generation += 1;
    this.entries.delete(hash);
  }

  /** Drops every entry of a key (its revocation was announced). */
  deleteKey(keyId: string): void {
    this.generation += 1;
    for (const [hash, entry] of this.entries) if (entry.key.id === keyId) this.entries.delete(hash);
    for (const [hash, id] of this.expired) if (id === keyId) this.expired.delete(hash);
  }

  /** While untrusted (revocations might be missed) nothing is served from or put in the cache. */
  setTrusted(trusted: boolean): void {
    this.generation += 1;
    this.trusted = trusted;
    if (trusted) return;
    // Their keys are still the ones clients use: while untrusted each is re-validated, in the lane of keys seen before.
    for (const [hash, entry] of this.entries) this.remember(hash, entry.key.id);
    this.entries.clear();
  }
}

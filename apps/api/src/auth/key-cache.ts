import { KEY_CACHE_TTL_MS, type AuthenticatedKey } from '@svc/core';

const MAX_ENTRIES = 10_000;

interface Entry {
  key: AuthenticatedKey;
  expiresAt: number;
}

/**
 * Keys this process looked up recently, by the SHA-256 of the presented key. An entry is only
 * trusted together with the rate-limit script's revocation check (apps/api/src/auth/authenticate.ts),
 * and never while the limiter is on its per-process fallback.
 */
export class KeyCache {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly ttlMs = KEY_CACHE_TTL_MS) {}

  get(hash: string): AuthenticatedKey | undefined {
    const entry = this.entries.get(hash);
    if (!entry) return undefined;
    if (entry.expiresAt <= Date.now()) {
      this.entries.delete(hash);
      return undefined;
    }
    return entry.key;
  }

  set(hash: string, key: AuthenticatedKey): void {
    if (this.entries.size >= MAX_ENTRIES) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.set(hash, { key, expiresAt: Date.now() + this.ttlMs });
  }

  delete(hash: string): void {
    this.entries.delete(hash);
  }
}

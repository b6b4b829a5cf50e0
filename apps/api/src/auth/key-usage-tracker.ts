import { touchApiKey, type AuthenticatedKey, type Db, type Logger } from '@svc/core';

const TOUCH_INTERVAL_MS = 60_000;

/**
 * Keeps `lastUsedAt` fresh to the minute without a database write per request: at most one
 * write per key per minute per process, and none while the stored time is under a minute old.
 */
export class KeyUsageTracker {
  private readonly lastWrite = new Map<string, number>();

  constructor(
    private readonly db: Db,
    private readonly logger: Logger,
  ) {}

  /** Notes a use of the key; never delays or fails the request. */
  noteUse(key: AuthenticatedKey): void {
    const now = Date.now();
    if (key.lastUsedAt && now - key.lastUsedAt.getTime() < TOUCH_INTERVAL_MS) return;
    const last = this.lastWrite.get(key.id);
    if (last !== undefined && now - last < TOUCH_INTERVAL_MS) return;
    this.lastWrite.set(key.id, now);
    if (this.lastWrite.size > 100_000) this.lastWrite.clear();
    touchApiKey(this.db, key.id).catch((error: Error) => {
      this.logger.warn('could not record key use', { keyId: key.id, error: error.message });
    });
  }
}

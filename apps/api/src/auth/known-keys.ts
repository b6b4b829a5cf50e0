import { findActiveKeyHashPrefix, KEY_HASH_PREFIX_LENGTH, listActiveKeyHashPrefixes, type Db, type Logger } from '@svc/core';

/** The most active keys the filter holds (~200 bytes each); with more, it stays off and lookups are gated as before. */
export const KNOWN_KEYS_MAX = 100_000;
/** After a failed read of the keys, the next try. */
const RELOAD_DELAY_MS = 5_000;

/** What the filter says of a presented key's hash. */
export type KnownKeyVerdict =
  /** No active key has this hash's prefix, and every key creation so far has been heard and read: refuse without a query. */
  | 'absent'
  /** An active key has this prefix: Postgres decides (and the comparison there is constant-time). */
  | 'present'
  /** The filter cannot tell (not listening, still reading, or a creation heard but not read yet): ask Postgres. */
  | 'unsure';

/**
 * The hash prefixes (KEY_HASH_PREFIX_LENGTH hex characters of the SHA-256) of every active key,
 * read from Postgres when the process starts listening for key notifications and kept up to date
 * by them: a well-formed key whose prefix is not here cannot be a key, and is refused with no
 * query, so a flood of random well-formed keys costs no Postgres work at all.
 *
 * It says 'absent' only while it is sure: while the listener is connected (a creation cannot be
 * missed), once its read of all keys finished after LISTEN began (nothing created before is
 * missed), and while no announced creation is still being read. Otherwise 'unsure', and the key is
 * looked up as before. A key created elsewhere is accepted here as soon as its creation is heard
 * (Postgres sends the notification at commit); a request racing that notification may be refused
 * once (docs/operations.md). A revoked key's prefix is dropped when its revocation is heard; until
 * then it is only 'present', and Postgres refuses the key.
 */
export class KnownKeys {
  /** Hash prefix → the number of active keys with it (two keys sharing 64 bits is unlikely, not impossible). */
  private readonly prefixes = new Map<string, number>();
  private readonly byId = new Map<string, string>();
  private state: 'off' | 'loading' | 'ready' = 'off';
  private listening = false;
  /** Moves whenever what the filter holds may be incomplete; a read that began before is dropped. */
  private epoch = 0;
  /** Creations heard whose prefix is being read: until read, 'absent' could hide them. */
  private pending = 0;
  /** Creations heard during a full read: added to its result, which may have been taken before them. */
  private heardDuringLoad: Array<[string, string]> = [];
  private retry: NodeJS.Timeout | undefined;

  constructor(
    private readonly db: Db,
    private readonly logger: Pick<Logger, 'warn'>,
    private readonly maxKeys = KNOWN_KEYS_MAX,
  ) {}

  verdict(keyHash: string): KnownKeyVerdict {
    if (this.state !== 'ready' || this.pending > 0) return 'unsure';
    return this.prefixes.has(keyHash.slice(0, KEY_HASH_PREFIX_LENGTH)) ? 'present' : 'absent';
  }

  /** True once it can refuse keys by itself (tests wait for it). */
  get ready(): boolean {
    return this.state === 'ready' && this.pending === 0;
  }

  /** The listener connected (read every key again: creations may have been missed) or lost its connection. */
  listeningChanged(listening: boolean): void {
    this.listening = listening;
    this.restart();
  }

  /** A key was created (announced by Postgres): read its prefix. */
  created(keyId: string): void {
    if (!this.listening) return;
    const epoch = this.epoch;
    this.pending += 1;
    findActiveKeyHashPrefix(this.db, keyId)
      .then((prefix) => {
        if (epoch !== this.epoch || prefix === undefined) return;
        this.add(keyId, prefix);
        if (this.state === 'loading') this.heardDuringLoad.push([keyId, prefix]);
      })
      .catch((error: Error) => {
        if (epoch !== this.epoch) return;
        // The new key might now be hidden: start over rather than guess.
        this.logger.warn('could not read a new key; reading every key again', { keyId, error: error.message });
        this.restart();
      })
      .finally(() => {
        this.pending -= 1;
      });
  }

  /** A key was revoked (announced by Postgres). */
  revoked(keyId: string): void {
    const prefix = this.byId.get(keyId);
    if (prefix === undefined) return;
    this.byId.delete(keyId);
    const count = this.prefixes.get(prefix) ?? 0;
    if (count <= 1) this.prefixes.delete(prefix);
    else this.prefixes.set(prefix, count - 1);
  }

  stop(): void {
    this.listening = false;
    this.restart();
  }

  private restart(): void {
    this.epoch += 1;
    clearTimeout(this.retry);
    this.prefixes.clear();
    this.byId.clear();
    this.heardDuringLoad = [];
    this.state = 'off';
    if (this.listening) void this.load(this.epoch);
  }

  private async load(epoch: number): Promise<void> {
    this.state = 'loading';
    try {
      const rows = await listActiveKeyHashPrefixes(this.db, this.maxKeys + 1);
      if (epoch !== this.epoch) return;
      if (rows.length > this.maxKeys) {
        this.logger.warn('more active keys than the key filter holds; unknown keys are looked up in Postgres', { max: this.maxKeys });
        this.state = 'off';
        return;
      }
      for (const row of rows) this.add(row.id, row.prefix);
      for (const [keyId, prefix] of this.heardDuringLoad) this.add(keyId, prefix);
      this.heardDuringLoad = [];
      this.state = 'ready';
    } catch (error) {
      if (epoch !== this.epoch) return;
      this.logger.warn('could not read the active keys; unknown keys are looked up in Postgres until it can', { error: (error as Error).message });
      this.state = 'off';
      this.retry = setTimeout(() => {
        if (epoch === this.epoch) void this.load(epoch);
      }, RELOAD_DELAY_MS);
      this.retry.unref();
    }
  }

  private add(keyId: string, prefix: string): void {
    if (this.byId.has(keyId)) return;
    this.byId.set(keyId, prefix);
    this.prefixes.set(prefix, (this.prefixes.get(prefix) ?? 0) + 1);
  }
}

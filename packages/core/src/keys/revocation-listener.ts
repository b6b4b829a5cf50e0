import { PgListener } from '../db/pg-listener.js';
import type { Logger } from '../logger.js';

/** The channel the api_keys trigger notifies with the id of each key revoked. */
export const KEY_REVOKED_CHANNEL = 'svc_api_key_revoked';
/** The channel the api_keys trigger notifies with the id of each key created. */
export const KEY_CREATED_CHANNEL = 'svc_api_key_created';

export interface RevocationListenerEvents {
  /** A key was revoked (its id). */
  onRevoked(keyId: string): void;
  /** A key was created (its id): a hash cached as unknown may now be a key. */
  onCreated?(keyId: string): void;
  /** The listener lost or regained its connection; while lost, revocations may be missed. */
  onConnectionChange(listening: boolean): void;
}

export interface RevocationListenerOptions {
  checkIntervalMs?: number;
  checkTimeoutMs?: number;
}

/**
 * LISTENs for key revocations (and creations) on a connection of its own (PgListener: keep-alive,
 * a check every few seconds, a new connection 1 s after one is lost). `listening` is true only
 * while notifications are sure to arrive; the key cache trusts nothing it holds meanwhile (ADR 4).
 */
export class RevocationListener {
  private readonly listener: PgListener;

  constructor(databaseUrl: string, events: RevocationListenerEvents, logger: Pick<Logger, 'warn' | 'info'>, options: RevocationListenerOptions = {}) {
    this.listener = new PgListener({
      databaseUrl,
      applicationName: 'svc key revocation listener',
      channels: [KEY_REVOKED_CHANNEL, KEY_CREATED_CHANNEL],
      onNotification(channel, keyId) {
        if (!keyId) return;
        if (channel === KEY_REVOKED_CHANNEL) events.onRevoked(keyId);
        else events.onCreated?.(keyId);
      },
      onListeningChange: (listening) => events.onConnectionChange(listening),
      logger,
      lostMessage: 'key revocation listener lost its connection; cached keys are not trusted until it is back',
      ...options,
    });
  }

  get listening(): boolean {
    return this.listener.listening;
  }

  /** Connects and starts listening; resolves once listening or after the first failure. */
  start(): Promise<void> {
    return this.listener.start();
  }

  stop(): Promise<void> {
    return this.listener.stop();
  }
}

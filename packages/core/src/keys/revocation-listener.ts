import pg from 'pg';
import type { Logger } from '../logger.js';

/** The channel the api_keys trigger notifies with the id of each key revoked. */
export const KEY_REVOKED_CHANNEL = 'svc_api_key_revoked';
/** The channel the api_keys trigger notifies with the id of each key created. */
export const KEY_CREATED_CHANNEL = 'svc_api_key_created';
const RECONNECT_DELAY_MS = 1_000;
/** How often the listening connection is asked to answer, to notice one that silently died. */
export const LISTENER_CHECK_INTERVAL_MS = 5_000;
/** A check not answered within this means the connection is presumed lost. */
export const LISTENER_CHECK_TIMEOUT_MS = 2_000;
/** TCP keep-alive probes start after this much silence (the OS then notices a dead peer). */
const TCP_KEEPALIVE_DELAY_MS = 10_000;

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
 * Holds one Postgres connection that LISTENs for key revocations (and creations) and reconnects
 * when it drops. A connection can die without a word (a NAT or firewall forgetting it): TCP
 * keep-alive lets the OS notice, and a `SELECT 1` every checkIntervalMs that must answer within
 * checkTimeoutMs lets us notice sooner. `listening` is true only while notifications are sure to
 * arrive, i.e. while the last check answered in time.
 */
export class RevocationListener {
  private client: pg.Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private checkTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly checkIntervalMs: number;
  private readonly checkTimeoutMs: number;
  listening = false;

  constructor(
    private readonly databaseUrl: string,
    private readonly events: RevocationListenerEvents,
    private readonly logger: Pick<Logger, 'warn' | 'info'>,
    options: RevocationListenerOptions = {},
  ) {
    this.checkIntervalMs = options.checkIntervalMs ?? LISTENER_CHECK_INTERVAL_MS;
    this.checkTimeoutMs = options.checkTimeoutMs ?? LISTENER_CHECK_TIMEOUT_MS;
  }

  /** Connects and starts listening; resolves once listening or after the first failure. */
  async start(): Promise<void> {
    this.checkTimer = setInterval(() => void this.check(), this.checkIntervalMs);
    this.checkTimer.unref();
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.checkTimer) clearInterval(this.checkTimer);
    this.setListening(false);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client({
      connectionString: this.databaseUrl,
      keepAlive: true,
      keepAliveInitialDelayMillis: TCP_KEEPALIVE_DELAY_MS,
    });
    client.on('notification', (message) => {
      if (!message.payload) return;
      if (message.channel === KEY_REVOKED_CHANNEL) this.events.onRevoked(message.payload);
      if (message.channel === KEY_CREATED_CHANNEL) this.events.onCreated?.(message.payload);
    });
    client.on('error', (error) => this.lose(client, error));
    client.on('end', () => this.lose(client));
    this.client = client;
    try {
      await client.connect();
      await client.query(`LISTEN ${KEY_REVOKED_CHANNEL}; LISTEN ${KEY_CREATED_CHANNEL}`);
      if (this.client === client && !this.stopped) this.setListening(true);
    } catch (error) {
      this.lose(client, error as Error);
    }
  }

  /** Asks the listening connection to answer; one that does not in time is dropped and replaced. */
  private async check(): Promise<void> {
    const client = this.client;
    if (!client || !this.listening) return;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.checkTimeoutMs);
    });
    try {
      const outcome = await Promise.race([client.query('SELECT 1'), timedOut]);
      if (outcome === 'timeout') this.lose(client, new Error(`no answer to a check within ${this.checkTimeoutMs} ms`));
    } catch (error) {
      this.lose(client, error as Error);
    } finally {
      clearTimeout(timer);
    }
  }

  private lose(client: pg.Client, error?: Error): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.setListening(false);
    if (!this.stopped) {
      this.logger.warn('key revocation listener lost its connection; cached keys are not trusted until it is back', {
        error: error?.message,
      });
      this.timer = setTimeout(() => void this.connect(), RECONNECT_DELAY_MS);
    }
    // A silently dead peer never answers the goodbye end() sends: close our side of the socket too.
    (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
    client.end().catch(() => undefined);
  }

  private setListening(listening: boolean): void {
    if (this.listening === listening) return;
    this.listening = listening;
    this.events.onConnectionChange(listening);
  }
}

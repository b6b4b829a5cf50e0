import pg from 'pg';
import type { Logger } from '../logger.js';

const RECONNECT_DELAY_MS = 1_000;
/** How often the listening connection is asked to answer, to notice one that silently died. */
export const LISTENER_CHECK_INTERVAL_MS = 5_000;
/** A check not answered within this means the connection is presumed lost. */
export const LISTENER_CHECK_TIMEOUT_MS = 2_000;
/** TCP keep-alive probes start after this much silence (the OS then notices a dead peer). */
const TCP_KEEPALIVE_DELAY_MS = 10_000;

export interface PgListenerOptions {
  databaseUrl: string;
  /**
   * The connection's application_name: what pg_stat_activity shows for it, so an operator (or a
   * test) can tell which listener a backend is; its `query` column changes with every check.
   */
  applicationName: string;
  /** The channels to LISTEN on (identifiers, not user input). */
  channels: readonly string[];
  /** Each notification on one of the channels, with its payload ('' when it has none). */
  onNotification(channel: string, payload: string): void;
  /** The listener lost or regained its connection; while lost, notifications may be missed. */
  onListeningChange?(listening: boolean): void;
  logger: Pick<Logger, 'warn'>;
  /** What is logged (a warning, with the error) when the connection is lost: what its loss means. */
  lostMessage: string;
  checkIntervalMs?: number;
  checkTimeoutMs?: number;
}

/**
 * One Postgres connection, outside any pool, that LISTENs on some channels and reconnects 1 s
 * after it drops (the API's key listener holds one). A connection can die without a word (a NAT or firewall forgetting it): TCP keep-alive
 * lets the OS notice, and a `SELECT 1` every checkIntervalMs that must answer within
 * checkTimeoutMs lets us notice sooner. `listening` is true only while notifications are sure to
 * arrive, i.e. while the last check answered in time.
 */
export class PgListener {
  private client: pg.Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private checkTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  listening = false;

  constructor(private readonly options: PgListenerOptions) {}

  /** Connects and starts listening; resolves once listening or after the first failure (it then retries). */
  async start(): Promise<void> {
    this.checkTimer = setInterval(() => void this.check(), this.options.checkIntervalMs ?? LISTENER_CHECK_INTERVAL_MS);
    this.checkTimer.unref();
    await this.connect();
  }

  /** Stops listening at once; resolves when the connection is closed. */
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
      connectionString: this.options.databaseUrl,
      application_name: this.options.applicationName,
      keepAlive: true,
      keepAliveInitialDelayMillis: TCP_KEEPALIVE_DELAY_MS,
    });
    const channels = new Set(this.options.channels);
    client.on('notification', (message) => {
      if (!this.stopped && channels.has(message.channel)) this.options.onNotification(message.channel, message.payload ?? '');
    });
    client.on('error', (error) => this.lose(client, error));
    client.on('end', () => this.lose(client));
    this.client = client;
    try {
      await client.connect();
      await client.query(this.options.channels.map((channel) => `LISTEN ${channel}`).join('; '));
      if (this.client === client && !this.stopped) this.setListening(true);
    } catch (error) {
      this.lose(client, error as Error);
    }
  }

  /** Asks the listening connection to answer; one that does not in time is dropped and replaced. */
  private async check(): Promise<void> {
    const client = this.client;
    if (!client || !this.listening) return;
    const timeoutMs = this.options.checkTimeoutMs ?? LISTENER_CHECK_TIMEOUT_MS;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    try {
      const outcome = await Promise.race([client.query('SELECT 1'), timedOut]);
      if (outcome === 'timeout') this.lose(client, new Error(`no answer to a check within ${timeoutMs} ms`));
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
      this.options.logger.warn(this.options.lostMessage, { error: error?.message });
      this.timer = setTimeout(() => void this.connect(), RECONNECT_DELAY_MS);
    }
    // A silently dead peer never answers the goodbye end() sends: close our side of the socket too.
    (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
    client.end().catch(() => undefined);
  }

  private setListening(listening: boolean): void {
    if (this.listening === listening) return;
    this.listening = listening;
    this.options.onListeningChange?.(listening);
  }
}

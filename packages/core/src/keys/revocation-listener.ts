import pg from 'pg';
import type { Logger } from '../logger.js';

/** The channel the api_keys trigger notifies with the id of each key revoked. */
export const KEY_REVOKED_CHANNEL = 'svc_api_key_revoked';
const RECONNECT_DELAY_MS = 1_000;

export interface RevocationListenerEvents {
  /** A key was revoked (its id). */
  onRevoked(keyId: string): void;
  /** The listener lost or regained its connection; while lost, revocations may be missed. */
  onConnectionChange(listening: boolean): void;
}

/**
 * Holds one Postgres connection that LISTENs for key revocations and reconnects when it drops.
 * `listening` is true only while notifications are sure to arrive.
 */
export class RevocationListener {
  private client: pg.Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  listening = false;

  constructor(
    private readonly databaseUrl: string,
    private readonly events: RevocationListenerEvents,
    private readonly logger: Pick<Logger, 'warn' | 'info'>,
  ) {}

  /** Connects and starts listening; resolves once listening or after the first failure. */
  async start(): Promise<void> {
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.setListening(false);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client({ connectionString: this.databaseUrl });
    client.on('notification', (message) => {
      if (message.channel === KEY_REVOKED_CHANNEL && message.payload) this.events.onRevoked(message.payload);
    });
    const lost = (error?: Error) => {
      if (this.client !== client) return;
      this.client = undefined;
      this.setListening(false);
      if (!this.stopped) {
        this.logger.warn('key revocation listener lost its connection; cached keys are not trusted until it is back', {
          error: error?.message,
        });
        this.timer = setTimeout(() => void this.connect(), RECONNECT_DELAY_MS);
      }
      client.end().catch(() => undefined);
    };
    client.on('error', lost);
    client.on('end', () => lost());
    this.client = client;
    try {
      await client.connect();
      await client.query(`LISTEN ${KEY_REVOKED_CHANNEL}`);
      if (this.client === client && !this.stopped) this.setListening(true);
    } catch (error) {
      lost(error as Error);
    }
  }

  private setListening(listening: boolean): void {
    if (this.listening === listening) return;
    this.listening = listening;
    this.events.onConnectionChange(listening);
  }
}

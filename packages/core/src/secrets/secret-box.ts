import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Logger } from '../logger.js';
import type { EncryptionKey } from './encryption-key.js';

/**
 * A sealed value as stored: `enc:v1:<keyId>:<base64url(iv ‖ ciphertext ‖ tag)>`, AES-256-GCM with
 * a fresh 12-byte IV each time and a 16-byte tag (docs/adr/0016-webhook-secrets-encrypted-at-rest.md). A
 * stored value without the `enc:` prefix is plain text: a secret is 64 hex characters and a
 * stored answer is JSON, neither of which starts so.
 */
const ENVELOPE_PREFIX = 'enc:';
const ENVELOPE_VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;
const ENVELOPE = /^enc:v1:(k_[0-9a-f]{8}):([A-Za-z0-9_-]+)$/;

/**
 * Where a value is stored. The ciphertext is bound to it (additional authenticated data), so a
 * sealed value copied to another row or another column does not open there.
 */
export type SecretPlace =
  | { table: 'webhook_subscriptions'; column: 'secret' | 'previous_secret'; subscriptionId: string }
  | { table: 'idempotency_keys'; column: 'response_body'; accountId: string; key: string };

/** The place of a subscription's secret, or of the secret a rotation replaced. */
export function subscriptionSecretPlace(subscriptionId: string, column: 'secret' | 'previous_secret' = 'secret'): SecretPlace {
  return { table: 'webhook_subscriptions', column, subscriptionId };
}

/** The place of a stored answer to an Idempotency-Key (it may hold a secret a create or a rotation showed). */
export function storedAnswerPlace(accountId: string, key: string): SecretPlace {
  return { table: 'idempotency_keys', column: 'response_body', accountId, key };
}

function additionalData(keyId: string, place: SecretPlace): Buffer {
  const row = place.table === 'webhook_subscriptions' ? [place.subscriptionId] : [place.accountId, place.key];
  return Buffer.from(JSON.stringify([ENVELOPE_VERSION, keyId, place.table, place.column, ...row]), 'utf8');
}

/** What cannot be decrypted, as the delivery log and the operator read it: the key's id, never any material. */
export type SecretUnavailableReason = 'key-not-configured' | 'not-authentic' | 'malformed';

/**
 * A stored value that cannot be opened with the configured keys: its key was removed from
 * SECRETS_ENCRYPTION_KEY (or the variable is unset), the key listed under that id does not
 * authenticate it (altered, or moved from another row or column), or it is not an envelope this
 * version reads. Never answered as plain text instead.
 */
export class SecretUnavailableError extends Error {
  constructor(
    readonly reason: SecretUnavailableReason,
    /** The key id the envelope names; null when it names none that can be read. */
    readonly keyId: string | null,
    message: string,
  ) {
    super(message);
    this.name = 'SecretUnavailableError';
  }
}

const nounOf = (place: SecretPlace) => (place.table === 'webhook_subscriptions' ? 'secret' : 'stored answer');

/**
 * Seals and opens webhook secrets (and stored answers that show one) with SECRETS_ENCRYPTION_KEY:
 * every write of a secret seals it with the newest key, every read that needs it opens it with
 * whichever listed key it names. Without keys it stores plain text, as before the variable
 * existed, and still refuses to open a sealed value (never a plain-text fallback).
 */
export class SecretBox {
  private readonly byId: ReadonlyMap<string, EncryptionKey>;
  /** The newest key, which seals; undefined when SECRETS_ENCRYPTION_KEY is unset. */
  readonly currentKey: EncryptionKey | undefined;

  constructor(keys: readonly EncryptionKey[]) {
    this.byId = new Map(keys.map((key) => [key.id, key]));
    this.currentKey = keys[0];
  }

  /** The ids of the configured keys, newest first. */
  keyIds(): string[] {
    return [...this.byId.keys()];
  }

  /** The stored form of a value: sealed with the newest key, or the value itself without keys. */
  seal(plaintext: string, place: SecretPlace): string {
    const key = this.currentKey;
    if (key === undefined) return plaintext;
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key.bytes(), iv);
    cipher.setAAD(additionalData(key.id, place));
    const sealed = Buffer.concat([iv, cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return `${ENVELOPE_PREFIX}${ENVELOPE_VERSION}:${key.id}:${sealed.toString('base64url')}`;
  }

  /** The value a stored form holds; SecretUnavailableError when it is sealed and cannot be opened here. */
  open(stored: string, place: SecretPlace): string {
    if (!stored.startsWith(ENVELOPE_PREFIX)) return stored;
    const noun = nounOf(place);
    const match = ENVELOPE.exec(stored);
    if (!match) throw new SecretUnavailableError('malformed', null, `${noun} cannot be decrypted: its stored form is not an envelope this version reads`);
    const keyId = match[1]!;
    const key = this.byId.get(keyId);
    if (key === undefined) {
      const unset = this.currentKey === undefined ? ' (the variable is unset)' : '';
      throw new SecretUnavailableError('key-not-configured', keyId, `${noun} cannot be decrypted: key ${keyId} is not in SECRETS_ENCRYPTION_KEY${unset}`);
    }
    const sealed = Buffer.from(match[2]!, 'base64url');
    if (sealed.length < IV_BYTES + TAG_BYTES) {
      throw new SecretUnavailableError('malformed', keyId, `${noun} cannot be decrypted: its envelope under key ${keyId} is truncated`);
    }
    try {
      const decipher = createDecipheriv('aes-256-gcm', key.bytes(), sealed.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES });
      decipher.setAAD(additionalData(keyId, place));
      decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
      return Buffer.concat([decipher.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      throw new SecretUnavailableError(
        'not-authentic',
        keyId,
        `${noun} cannot be decrypted: key ${keyId} does not authenticate it (altered, or copied from another row or column)`,
      );
    }
  }

  /** The id of the key a stored form is sealed with; null for plain text, `malformed` for an envelope this version cannot read. */
  keyIdOf(stored: string): string | null {
    if (!stored.startsWith(ENVELOPE_PREFIX)) return null;
    return ENVELOPE.exec(stored)?.[1] ?? 'malformed';
  }

  /** True when a stored form is already what seal() would write now: sealed with the newest key (plain text without keys). */
  isCurrent(stored: string): boolean {
    return this.keyIdOf(stored) === (this.currentKey?.id ?? null);
  }
}

/**
 * The process's SecretBox, from SECRETS_ENCRYPTION_KEY's keys. Without keys it warns, once, that
 * secrets are stored in plain text and how to encrypt them: each process builds one at start.
 */
export function createSecretBox(keys: readonly EncryptionKey[], logger: Pick<Logger, 'warn'>): SecretBox {
  if (keys.length === 0) {
    logger.warn(
      'webhook secrets are stored in plain text: set SECRETS_ENCRYPTION_KEY (32 random bytes in base64, such as `openssl rand -base64 32` prints) on every process to encrypt them at rest, then run `svc secrets reencrypt`',
    );
  }
  return new SecretBox(keys);
}

import { createHash } from 'node:crypto';
import { inspect } from 'node:util';

/** AES-256: a key is exactly this many bytes. */
export const ENCRYPTION_KEY_BYTES = 32;

/** Hashed before the key bytes, so that the id is never the hash any other use of the key would give. */
const KEY_ID_LABEL = 'svc secrets-encryption-key id v1\0';

/**
 * One key of SECRETS_ENCRYPTION_KEY. Its id is derived from its bytes (`k_` and 8 hex characters
 * of a labelled SHA-256), so nothing needs configuring beside the key and every process that
 * holds the key agrees on the id. The bytes are readable only through `bytes()`: the object
 * prints and serialises as its id, so a config dump or a log line cannot carry the key.
 */
export class EncryptionKey {
  readonly id: string;
  readonly #bytes: Buffer;

  constructor(bytes: Buffer) {
    if (bytes.length !== ENCRYPTION_KEY_BYTES) throw new Error(`an encryption key is ${ENCRYPTION_KEY_BYTES} bytes`);
    this.#bytes = Buffer.from(bytes);
    this.id = encryptionKeyId(bytes);
  }

  /** The key material, for the cipher only. */
  bytes(): Buffer {
    return this.#bytes;
  }

  toJSON(): string {
    return this.id;
  }

  toString(): string {
    return this.id;
  }

  [inspect.custom](): string {
    return `EncryptionKey(${this.id})`;
  }
}

/** The id an envelope names its key by: `k_` and the first 8 hex characters of SHA-256(label ‖ key). */
export function encryptionKeyId(bytes: Buffer): string {
  return `k_${createHash('sha256').update(KEY_ID_LABEL).update(bytes).digest('hex').slice(0, 8)}`;
}

/** 32 bytes in base64: 43 characters and one `=`, or 43 without it; standard or url-safe alphabet, not mixed. */
const STANDARD_BASE64_KEY = /^[A-Za-z0-9+/]{43}=?$/;
const URL_SAFE_BASE64_KEY = /^[A-Za-z0-9_-]{43}=?$/;

/**
 * The keys of a SECRETS_ENCRYPTION_KEY value, newest first, or why it cannot be used. The reason
 * says which entry is wrong and how, never what it holds.
 */
export function parseEncryptionKeys(raw: string): { keys: EncryptionKey[] } | { problem: string } {
  const entries = raw.split(',').map((entry) => entry.trim());
  const keys: EncryptionKey[] = [];
  const where = (i: number) => (entries.length === 1 ? 'its key' : `entry ${i + 1} of ${entries.length}`);
  for (const [i, entry] of entries.entries()) {
    if (entry === '') return { problem: `has an empty entry (${where(i)}): list keys separated by single commas, newest first` };
    const standard = STANDARD_BASE64_KEY.test(entry);
    if (!standard && !URL_SAFE_BASE64_KEY.test(entry)) {
      return { problem: `must be ${ENCRYPTION_KEY_BYTES} bytes in base64 (44 characters, as \`openssl rand -base64 32\` prints), comma-separated, newest first; ${where(i)} is not` };
    }
    const normalized = (standard ? entry : entry.replaceAll('-', '+').replaceAll('_', '/')).replace(/=$/, '');
    const bytes = Buffer.from(normalized, 'base64');
    // Stray bits in the last character would decode to the same key: such a value was mistyped.
    if (bytes.length !== ENCRYPTION_KEY_BYTES || bytes.toString('base64').replace(/=$/, '') !== normalized) {
      return { problem: `must be ${ENCRYPTION_KEY_BYTES} bytes in base64; ${where(i)} is not canonical base64 of ${ENCRYPTION_KEY_BYTES} bytes` };
    }
    const key = new EncryptionKey(bytes);
    const same = keys.findIndex((other) => other.bytes().equals(bytes));
    if (same >= 0) return { problem: `lists the same key twice (entries ${same + 1} and ${i + 1}): remove one` };
    const clash = keys.findIndex((other) => other.id === key.id);
    if (clash >= 0) return { problem: `has two keys with the same id ${key.id} (entries ${clash + 1} and ${i + 1}): generate another key` };
    keys.push(key);
  }
  return { keys };
}

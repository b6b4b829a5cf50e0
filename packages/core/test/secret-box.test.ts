import { createHash, randomBytes } from 'node:crypto';
import { inspect } from 'node:util';
import { describe, expect, it } from '@jest/globals';
import { ConfigError, loadConfig } from '../src/config.js';
import { createCapturingLogger } from '../src/testing/capturing-logger.js';
import { createSecretBox, SecretBox, SecretUnavailableError, storedAnswerPlace, subscriptionSecretPlace } from '../src/secrets/secret-box.js';

const SECRET = 'a3'.repeat(32);
const newKey = () => randomBytes(32);
const keysOf = (...keys: Buffer[]) => loadConfig({ SECRETS_ENCRYPTION_KEY: keys.map((key) => key.toString('base64')).join(',') }).secretsEncryptionKeys;
const boxOf = (...keys: Buffer[]) => new SecretBox(keysOf(...keys));
const idOf = (key: Buffer) => `k_${createHash('sha256').update('svc secrets-encryption-key id v1\0').update(key).digest('hex').slice(0, 8)}`;

/** What opening throws (undefined if it opens). */
function openingError(box: SecretBox, stored: string, place = subscriptionSecretPlace('wh_a')): SecretUnavailableError | undefined {
  try {
    box.open(stored, place);
    return undefined;
  } catch (error) {
    if (error instanceof SecretUnavailableError) return error;
    throw error;
  }
}

describe('SECRETS_ENCRYPTION_KEY', () => {
  it('reads a comma-separated list, newest first, in standard or url-safe base64 with or without padding, each key with an id derived from it', () => {
    const [a, b] = [newKey(), newKey()];
    const config = loadConfig({ SECRETS_ENCRYPTION_KEY: ` ${a.toString('base64')} , ${b.toString('base64url')}` });

    expect(config.secretsEncryptionKeys.map((key) => key.id)).toEqual([idOf(a), idOf(b)]);
    expect(config.secretsEncryptionKeys.map((key) => key.bytes())).toEqual([a, b]);
    expect(idOf(a)).toMatch(/^k_[0-9a-f]{8}$/);
    expect(loadConfig({ SECRETS_ENCRYPTION_KEY: a.toString('base64').replace(/=$/, '') }).secretsEncryptionKeys[0]!.id).toBe(idOf(a));
    expect(loadConfig({}).secretsEncryptionKeys).toEqual([]);
    expect(loadConfig({ SECRETS_ENCRYPTION_KEY: '  ' }).secretsEncryptionKeys).toEqual([]);
  });

  it('stops at a bad value with one line naming the variable and never any of the value', () => {
    const good = newKey().toString('base64');
    const bad = {
      short: randomBytes(31).toString('base64'),
      long: randomBytes(33).toString('base64'),
      hex: randomBytes(32).toString('hex'),
      mixedAlphabets: `${good.slice(0, 10)}-_+/${good.slice(14)}`,
      strayBits: `${good.slice(0, 42)}${good[42] === 'B' ? 'C' : 'B'}=`,
      emptyEntry: `${good},`,
      duplicate: `${good},${newKey().toString('base64')},${good}`,
    };
    for (const [name, value] of Object.entries(bad)) {
      let thrown: unknown;
      try {
        loadConfig({ SECRETS_ENCRYPTION_KEY: value });
      } catch (error) {
        thrown = error;
      }

      expect([name, thrown]).toEqual([name, expect.any(ConfigError)]);
      const message = (thrown as ConfigError).message;
      expect((thrown as ConfigError).variable).toBe('SECRETS_ENCRYPTION_KEY');
      expect(message).toMatch(/^invalid configuration: SECRETS_ENCRYPTION_KEY /);
      expect(message).not.toContain('\n');
      for (const part of value.split(',').filter((entry) => entry !== '')) expect([name, message.includes(part.slice(0, 8))]).toEqual([name, false]);
    }
  });

  it('a key prints and serialises as its id only, so a configuration dump or a log line never carries it', () => {
    const key = newKey();
    const config = loadConfig({ SECRETS_ENCRYPTION_KEY: key.toString('base64') });
    const printed = [JSON.stringify(config), inspect(config, { depth: 10, showHidden: true }), String(config.secretsEncryptionKeys[0])];

    for (const text of printed) {
      expect(text).toContain(idOf(key));
      for (const form of [key.toString('base64'), key.toString('base64url'), key.toString('hex')]) expect(text).not.toContain(form.slice(0, 12));
    }
  });
});

describe('SecretBox', () => {
  it('seals as enc:v1:<keyId>:<base64url of 12-byte IV, ciphertext, 16-byte tag> with a fresh IV each time, and opens it back', () => {
    const key = newKey();
    const box = boxOf(key);
    const place = subscriptionSecretPlace('wh_a');

    const sealed = [box.seal(SECRET, place), box.seal(SECRET, place)];

    for (const stored of sealed) {
      const [prefix, version, keyId, payload] = stored.split(':');
      expect([prefix, version, keyId]).toEqual(['enc', 'v1', idOf(key)]);
      expect(Buffer.from(payload!, 'base64url')).toHaveLength(12 + SECRET.length + 16);
      expect(stored).not.toContain(SECRET);
      expect(box.open(stored, place)).toBe(SECRET);
    }
    expect(sealed[0]).not.toBe(sealed[1]);
    expect(box.keyIdOf(sealed[0]!)).toBe(idOf(key));
    expect(box.isCurrent(sealed[0]!)).toBe(true);
  });

  it('opens what an older listed key sealed, and seals only with the first', () => {
    const [older, newer] = [newKey(), newKey()];
    const place = subscriptionSecretPlace('wh_a');
    const sealedBefore = boxOf(older).seal(SECRET, place);
    const box = boxOf(newer, older);

    expect(box.open(sealedBefore, place)).toBe(SECRET);
    expect(box.isCurrent(sealedBefore)).toBe(false);
    expect(box.keyIdOf(box.seal(SECRET, place))).toBe(idOf(newer));
  });

  it('passes plain text through, with or without keys (rows stored before the key was set)', () => {
    const place = subscriptionSecretPlace('wh_a');

    expect(boxOf(newKey()).open(SECRET, place)).toBe(SECRET);
    expect(new SecretBox([]).open(SECRET, place)).toBe(SECRET);
    expect(new SecretBox([]).seal(SECRET, place)).toBe(SECRET);
    expect(new SecretBox([]).isCurrent(SECRET)).toBe(true);
    expect(boxOf(newKey()).keyIdOf(SECRET)).toBeNull();
  });

  it('refuses a value sealed with a key that is not listed, or with none listed, naming the key id and never falling back', () => {
    const [removed, kept] = [newKey(), newKey()];
    const sealed = boxOf(removed).seal(SECRET, subscriptionSecretPlace('wh_a'));

    expect(openingError(boxOf(kept), sealed)).toMatchObject({
      reason: 'key-not-configured',
      keyId: idOf(removed),
      message: `secret cannot be decrypted: key ${idOf(removed)} is not in SECRETS_ENCRYPTION_KEY`,
    });
    expect(openingError(new SecretBox([]), sealed)).toMatchObject({
      reason: 'key-not-configured',
      message: `secret cannot be decrypted: key ${idOf(removed)} is not in SECRETS_ENCRYPTION_KEY (the variable is unset)`,
    });
  });

  it('refuses a value altered, or moved to another row or another column, as not authentic', () => {
    const key = newKey();
    const box = boxOf(key);
    const sealed = box.seal(SECRET, subscriptionSecretPlace('wh_a'));
    const payload = Buffer.from(sealed.split(':')[3]!, 'base64url');
    payload[20]! ^= 1;
    const altered = `enc:v1:${idOf(key)}:${payload.toString('base64url')}`;
    const notAuthentic = {
      reason: 'not-authentic',
      keyId: idOf(key),
      message: `secret cannot be decrypted: key ${idOf(key)} does not authenticate it (altered, or copied from another row or column)`,
    };

    expect(openingError(box, altered)).toMatchObject(notAuthentic);
    expect(openingError(box, sealed, subscriptionSecretPlace('wh_b'))).toMatchObject(notAuthentic);
    expect(openingError(box, sealed, subscriptionSecretPlace('wh_a', 'previous_secret'))).toMatchObject(notAuthentic);
    expect(openingError(box, sealed, storedAnswerPlace('acct_a', 'wh_a'))).toMatchObject({ reason: 'not-authentic' });
    expect(openingError(box, 'enc:v2:whatever')).toMatchObject({ reason: 'malformed', keyId: null });
    expect(openingError(box, `enc:v1:${idOf(key)}:AAAA`)).toMatchObject({ reason: 'malformed' });
  });
});

describe('createSecretBox', () => {
  it('warns once, at creation, that secrets are stored in plain text and how to encrypt them; with a key it says nothing', () => {
    const without = createCapturingLogger();
    const withKey = createCapturingLogger();

    const box = createSecretBox([], without.logger);
    box.seal(SECRET, subscriptionSecretPlace('wh_a'));
    box.open(SECRET, subscriptionSecretPlace('wh_a'));
    createSecretBox(keysOf(newKey()), withKey.logger);

    expect(without.entries).toEqual([expect.objectContaining({ level: 'warn', message: expect.stringMatching(/^webhook secrets are stored in plain text: set SECRETS_ENCRYPTION_KEY .*svc secrets reencrypt/) })]);
    expect(withKey.entries).toEqual([]);
  });
});

import { createHmac } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { buildEventBody, eventBodySegments } from '../src/events/event-types.js';
import { generateApiKey, hashApiKey, KEY_DISPLAY_LENGTH, KEY_PREFIX, parseScopes, serializeScopes } from '../src/keys/api-key.js';
import { signBody, verifySignature } from '../src/signing/signature.js';
import { normalizeDomain } from '../src/sites/domain.js';
import { InputError } from '../src/errors.js';

const SECRET = 'a'.repeat(64);

describe('signBody and verifySignature', () => {
  it('signs the raw bytes with HMAC-SHA256 keyed by the secret string, as sha256=<hex>', () => {
    const body = '{"event":"scan.completed"}';
    const expected = `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;

    expect(signBody(body, SECRET)).toBe(expected);
    expect(verifySignature(Buffer.from(body), expected, SECRET)).toBe(true);
  });

  it('rejects a signature of other bytes, another secret, a bare hex digest, or no header', () => {
    const body = '{"a":1}';
    const header = signBody(body, SECRET);

    expect(verifySignature('{"a": 1}', header, SECRET)).toBe(false);
    expect(verifySignature(body, header, 'b'.repeat(64))).toBe(false);
    expect(verifySignature(body, header.slice('sha256='.length), SECRET)).toBe(false);
    expect(verifySignature(body, undefined, SECRET)).toBe(false);
    expect(verifySignature(body, 'sha256=zz', SECRET)).toBe(false);
  });
});

describe('API keys', () => {
  it('makes svc_live_ keys with at least 128 random bits, stored only as a SHA-256 hex hash', () => {
    const key = generateApiKey();
    const randomPart = key.slice(KEY_PREFIX.length);

    expect(key.startsWith('svc_live_')).toBe(true);
    expect(Buffer.from(randomPart, 'base64url').length * 8).toBeGreaterThanOrEqual(128);
    expect(hashApiKey(key)).toMatch(/^[0-9a-f]{64}$/);
    expect(generateApiKey()).not.toBe(key);
    expect(key.slice(0, KEY_DISPLAY_LENGTH)).toHaveLength(12);
  });

  it('stores scopes comma-separated and reads back only known ones', () => {
    expect(serializeScopes(['read:sites', 'write:webhooks'])).toBe('read:sites,write:webhooks');
    expect(parseScopes('read:sites, write:webhooks,admin:*')).toEqual(['read:sites', 'write:webhooks']);
  });
});

describe('normalizeDomain', () => {
  it.each([
    ['https://www.Example.com/', 'example.com'],
    ['http://shop.example.co.uk', 'shop.example.co.uk'],
    ['WWW.example.org', 'example.org'],
    ['example.net.', 'example.net'],
    ['  acme.example  ', 'acme.example'],
  ])('normalizes %p to %p', (input, expected) => {
    expect(normalizeDomain(input)).toBe(expected);
  });

  it.each(['', 'https://example.com/blog', 'example.com:8080', 'user@example.com', 'exa mple.com', 'https://example.com/?q=1'])(
    'refuses %p as not a bare domain',
    (input) => {
      expect(() => normalizeDomain(input)).toThrow(InputError);
    },
  );
});

describe('buildEventBody', () => {
  it('serializes { event, timestamp, data } with exactly the §6.1 fields and scores as numbers', () => {
    const at = new Date('2026-11-21T02:00:00.000Z');
    const extra = { scanId: 's', siteId: 'x', domain: 'd.example', score: 87.5, secret: 'leak' };

    const body = JSON.parse(buildEventBody('scan.completed', at, extra));

    expect(body).toEqual({
      event: 'scan.completed',
      timestamp: '2026-11-21T02:00:00.000Z',
      data: { scanId: 's', siteId: 'x', domain: 'd.example', score: 87.5 },
    });
  });
});

describe('eventBodySegments', () => {
  it('joined with the values JSON-encoded, gives exactly JSON.stringify of the envelope, whatever the data holds', () => {
    const at = new Date('2026-11-21T02:00:00.123Z');
    const data = { runId: 'run_1', siteId: 'site "1"', domain: 'caf\u00e9.example\n☃', compositeScore: 72.25 };

    const segments = eventBodySegments('ai_check.completed', data, ['siteId', 'domain']);
    const values: Record<string, string> = { timestamp: at.toISOString(), siteId: data.siteId, domain: data.domain };
    const joined = segments.map((s) => (typeof s === 'string' ? s : JSON.stringify(values[s.field]))).join('');

    expect(segments.filter((s) => typeof s !== 'string')).toEqual([{ field: 'timestamp' }, { field: 'siteId' }, { field: 'domain' }]);
    expect(joined).toBe(JSON.stringify({ event: 'ai_check.completed', timestamp: at.toISOString(), data }));
    expect(joined).toBe(buildEventBody('ai_check.completed', at, data));
  });
});

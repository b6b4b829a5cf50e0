import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

/** Spec §5: live keys start with this prefix. */
export const KEY_PREFIX = 'svc_live_';
/** Spec §5, §8: Settings shows this many leading characters of a key. */
export const KEY_DISPLAY_LENGTH = 12;
/** 192 random bits, base64url: comfortably over the 128 the issue asks for. */
const KEY_RANDOM_BYTES = 24;

export const SCOPES = ['read:sites', 'read:scans', 'read:ai-monitor', 'read:webhooks', 'write:webhooks'] as const;
export type Scope = (typeof SCOPES)[number];

/** generateApiKey's output: the prefix, then exactly the base64url of KEY_RANDOM_BYTES (no padding). */
const KEY_SHAPE = new RegExp(`^${KEY_PREFIX}[A-Za-z0-9_-]{${Math.ceil((KEY_RANDOM_BYTES * 4) / 3)}}$`);

/**
 * True when the token could be a key we issued (prefix, length, alphabet). Anything else is
 * refused without hashing it or asking the database: no key can match it.
 */
export function isWellFormedApiKey(token: string): boolean {
  return KEY_SHAPE.test(token);
}

/** A new full key; it is shown once and only its hash is stored. */
export function generateApiKey(): string {
  return KEY_PREFIX + randomBytes(KEY_RANDOM_BYTES).toString('base64url');
}

/** The stored form of a key: SHA-256 hex (keys are high-entropy, so no slow hash is needed). */
export function hashApiKey(key: string): string {
  // One-shot: the API hashes the presented key on every request (no Hash object to build).
  return hash('sha256', key, 'hex');
}

/** Constant-time equality of two hex hashes of the same length. */
export function hashesEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && timingSafeEqual(left, right);
}

/** True for a scope of spec §5. */
export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/** Spec §5.7: scopes are stored as a comma-separated list. */
export function serializeScopes(scopes: readonly Scope[]): string {
  return scopes.join(',');
}

/** The inverse of serializeScopes; unknown entries are dropped rather than trusted. */
export function parseScopes(stored: string): Scope[] {
  return stored
    .split(',')
    .map((scope) => scope.trim())
    .filter(isScope);
}

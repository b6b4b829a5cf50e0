import type { NextFunction, Request, RequestHandler, Response } from 'express';
import {
  findActiveKeyByHash,
  forAccount,
  hashApiKey,
  InsufficientScopeError,
  InvalidKeyError,
  isWellFormedApiKey,
  RateLimitedError,
  UnauthorizedError,
  type AccountRepositories,
  type AuthenticatedKey,
  type Db,
  type Scope,
} from '@svc/core';
import type { SlidingWindowLimiter } from '../rate-limit/sliding-window-limiter.js';
import type { KeyCache } from './key-cache.js';
import type { KeyLookupGate } from './key-lookup-gate.js';
import type { KnownKeys } from './known-keys.js';
import type { KeyUsageTracker } from './key-usage-tracker.js';
import type { SharedKeyLookups } from './shared-key-lookups.js';
import type { UnknownKeyCache } from './unknown-key-cache.js';

/** What authenticate() leaves for rateLimit(): the key, its hash, and whether it came from the cache. */
interface AuthLocals {
  auth: AuthenticatedKey;
  keyHash: string;
  keyFromCache: boolean;
}

const INVALID_KEY_MESSAGE = 'The API key is unknown, revoked or no longer active.';

const BEARER = /^Bearer +([\x21-\x7e]+)$/i;

/** How many Authorization headers the request carried (rawHeaders holds name, value pairs). */
function authorizationHeaderCount(req: Request): number {
  let count = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) if (req.rawHeaders[i]?.toLowerCase() === 'authorization') count += 1;
  return count;
}

/** The key that authenticated this request (set by `authenticate`). */
export function authOf(res: Response): AuthenticatedKey {
  const auth = res.locals.auth as AuthenticatedKey | undefined;
  if (!auth) throw new Error('route mounted without authenticate()');
  return auth;
}

/** The repositories of the account whose key authenticated this request: the one way a handler reaches data. */
export function accountOf(res: Response, db: Db): AccountRepositories {
  return forAccount(db, authOf(res).accountId);
}

/**
 * Spec §5, §7: bearer key → 401 unauthorized (missing or malformed) or 401 invalid_key. A token
 * that cannot be a key (prefix, length, alphabet) is refused with no I/O; a well-formed key that
 * matched nothing within UNKNOWN_KEY_CACHE_TTL_MS is refused from the negative cache; a key seen
 * in the last KEY_CACHE_TTL_MS comes from the cache, and rateLimit() then confirms in the same
 * Redis call that its revocation has not been announced. Concurrent requests with the same
 * uncached key share one lookup; lookups that do reach Postgres pass through the gate, so a
 * flood of random keys cannot take the whole pool.
 *
 * With the key filter (`known`, wired by main.ts to the key notifications), a well-formed key
 * whose hash prefix no active key has is refused with no query at all. Lookups that do happen take
 * one of two lanes, each with its own bound: keys the filter knows or this process found recently
 * (a cache entry that expired), and keys never seen; a flood of random keys fills only the second,
 * so a legitimate key's re-validation never waits behind it.
 */
export function authenticate(deps: {
  db: Db;
  cache: KeyCache;
  unknown: UnknownKeyCache;
  /** Lookups of keys never seen here. */
  lookups: KeyLookupGate;
  /** Lookups of keys the filter knows or this process found recently; else everything takes `lookups`. */
  revalidations?: KeyLookupGate;
  shared: SharedKeyLookups<AuthenticatedKey | undefined>;
  known?: KnownKeys;
}): RequestHandler {
  const lookUp = async (keyHash: string): Promise<AuthenticatedKey> => {
    if (deps.unknown.has(keyHash)) throw new InvalidKeyError(INVALID_KEY_MESSAGE);
    const verdict = deps.known?.verdict(keyHash) ?? 'unsure';
    if (verdict === 'absent') throw new InvalidKeyError(INVALID_KEY_MESSAGE);
    const seen = verdict === 'present' || deps.cache.seenRecently(keyHash);
    const gate = seen && deps.revalidations ? deps.revalidations : deps.lookups;
    const generation = deps.cache.currentGeneration();
    const unknownGeneration = deps.unknown.currentGeneration();
    const key = await deps.shared.run(keyHash, [generation, unknownGeneration], () =>
      gate.run(() => findActiveKeyByHash(deps.db, keyHash)),
    );
    if (!key) {
      deps.unknown.add(keyHash, unknownGeneration);
      throw new InvalidKeyError(INVALID_KEY_MESSAGE);
    }
    deps.cache.set(keyHash, key, generation);
    return key;
  };
  return (req: Request, res: Response, next: NextFunction) => {
    const keyHash = hashApiKey(presentedToken(req));
    const cached = deps.cache.get(keyHash);
    // Most requests end here, with no promise to settle: the key was looked up recently.
    if (cached) return admit(res, next, { auth: cached, keyHash, keyFromCache: true });
    return lookUp(keyHash).then((key) => admit(res, next, { auth: key, keyHash, keyFromCache: false }));
  };
}

/** The bearer token of the request, or the 401 its Authorization header deserves. */
function presentedToken(req: Request): string {
  const header = req.get('authorization');
  if (header === undefined || header.trim() === '') {
    throw new UnauthorizedError('The Authorization header is missing; send "Authorization: Bearer <API key>".');
  }
  if (authorizationHeaderCount(req) > 1) {
    // Node keeps the first and drops the rest; a proxy in front may have picked another one.
    throw new UnauthorizedError('More than one Authorization header was sent; send exactly one.');
  }
  const match = BEARER.exec(header.trim());
  if (!match?.[1]) {
    throw new UnauthorizedError('The Authorization header is malformed; expected "Bearer <API key>".');
  }
  const token = match[1];
  if (!isWellFormedApiKey(token)) throw new InvalidKeyError(INVALID_KEY_MESSAGE);
  return token;
}

function admit(res: Response, next: NextFunction, locals: AuthLocals): void {
  res.locals.auth = locals.auth;
  res.locals.keyHash = locals.keyHash;
  res.locals.keyFromCache = locals.keyFromCache;
  next();
}

/**
 * Spec §7, §8: per key, at most the configured number of requests in any 60 s window. The same
 * Redis call refuses a key whose revocation was announced; while Redis is away, a cached key is
 * checked against Postgres again, since no announcement can be seen. A key that passes is noted
 * as used (lastUsedAt).
 */
export function rateLimit(deps: { limiter: SlidingWindowLimiter; cache: KeyCache; db: Db; usage: KeyUsageTracker }): RequestHandler {
  return async (_req: Request, res: Response, next: NextFunction) => {
    const { auth, keyHash, keyFromCache } = res.locals as AuthLocals;
    const decision = await deps.limiter.consume(auth.id);
    if (decision.revoked || (!decision.shared && keyFromCache && !(await findActiveKeyByHash(deps.db, keyHash)))) {
      deps.cache.delete(keyHash);
      throw new InvalidKeyError(INVALID_KEY_MESSAGE);
    }
    // Only now is the key known not to be revoked: a refused key's lastUsedAt must not move.
    deps.usage.noteUse(auth);
    res.setHeader('X-RateLimit-Limit', String(decision.limit));
    res.setHeader('X-RateLimit-Remaining', String(decision.remaining));
    res.setHeader('X-RateLimit-Reset', String(Math.ceil(decision.resetAtMs / 1000)));
    if (!decision.allowed) {
      throw new RateLimitedError(`More than ${decision.limit} requests per minute for this API key; retry after 60 seconds.`);
    }
    next();
  };
}

/** Spec §5.2: a key without the endpoint's scope gets 403 insufficient_scope naming the scope. */
export function requireScope(scope: Scope): RequestHandler {
  return (_req: Request, res: Response, next: NextFunction) => {
    if (!authOf(res).scopes.includes(scope)) throw new InsufficientScopeError(scope);
    next();
  };
}

import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Db, DbOrTx } from '../db/knex.js';
import { InputError, NotFoundError, SettingsLinkGoneError, SettingsLinkInvalidError } from '../errors.js';
import { hashApiKey } from '../keys/api-key.js';

/** A sign-in link lives this long unless its issuer asks otherwise, and never longer than the maximum. */
export const SETTINGS_LINK_DEFAULT_TTL_SECONDS = 10 * 60;
export const SETTINGS_LINK_MAX_TTL_SECONDS = 60 * 60;
/** A Settings session ends after this long without a request, or this long after it began. */
export const SETTINGS_SESSION_IDLE_MS = 30 * 60_000;
export const SETTINGS_SESSION_LIFETIME_MS = 12 * 60 * 60_000;
/** The path of the sign-in link; the token is its one query parameter. */
export const SETTINGS_SIGN_IN_PATH = '/settings/sign-in';

const LINK_PREFIX = 'svcl_';
const SESSION_PREFIX = 'svcs_';
/** 256 random bits, base64url. */
const TOKEN_BYTES = 32;
const TOKEN_SHAPE = /^[A-Za-z0-9_-]{43}$/;
/** Expired links and ended sessions are deleted this long after they stopped being usable, a batch at a time. */
const KEEP_ENDED_MS = 24 * 60 * 60_000;
const PURGE_BATCH = 1_000;

const INVALID_LINK = 'This sign-in link is not valid. Open Settings again from your account to get a new link.';
const USED_LINK = 'This sign-in link has already been used. Each link opens Settings once: open Settings again from your account.';
const EXPIRED_LINK = 'This sign-in link has expired. Open Settings again from your account to get a new link.';

const newToken = (prefix: string) => prefix + randomBytes(TOKEN_BYTES).toString('base64url');
const wellFormed = (token: string, prefix: string) => token.startsWith(prefix) && TOKEN_SHAPE.test(token.slice(prefix.length));

export interface SettingsLink {
  url: string;
  expiresAt: Date;
}

/**
 * Issues a single-use sign-in link to one account's Settings, for the main product (which owns
 * user login) and for `svc portal link`. The token is 256 random bits, stored only as its SHA-256
 * hash; the URL's origin is `baseUrl` (PUBLIC_BASE_URL). Deletes a batch of links and sessions
 * ended more than a day ago, so the tables hold only what can still be used or explained.
 */
export async function createSettingsLink(
  db: Db,
  input: { accountId: string; baseUrl: string; ttlSeconds?: number },
): Promise<SettingsLink> {
  const ttl = input.ttlSeconds ?? SETTINGS_LINK_DEFAULT_TTL_SECONDS;
  if (!Number.isInteger(ttl) || ttl < 1 || ttl > SETTINGS_LINK_MAX_TTL_SECONDS) {
    throw new InputError(`the link's lifetime must be a whole number of seconds from 1 to ${SETTINGS_LINK_MAX_TTL_SECONDS}`);
  }
  const account = await db('accounts').where({ id: input.accountId }).first('id');
  if (!account) throw new NotFoundError(`account ${input.accountId} does not exist`);
  await purgeEndedSettingsRows(db);
  const token = newToken(LINK_PREFIX);
  const [row] = (await db('settings_links')
    .insert({ token_hash: hashApiKey(token), account_id: input.accountId, expires_at: db.raw(`now() + make_interval(secs => ?)`, [ttl]) })
    .returning(['expires_at'])) as Array<{ expires_at: Date }>;
  const url = new URL(SETTINGS_SIGN_IN_PATH, input.baseUrl);
  url.searchParams.set('token', token);
  return { url: url.toString(), expiresAt: row!.expires_at };
}

async function purgeEndedSettingsRows(db: DbOrTx): Promise<void> {
  const before = new Date(Date.now() - KEEP_ENDED_MS);
  await db.raw(
    `DELETE FROM settings_links WHERE token_hash IN (SELECT token_hash FROM settings_links WHERE expires_at < ? LIMIT ${PURGE_BATCH})`,
    [before],
  );
  await db.raw(
    `DELETE FROM settings_sessions WHERE token_hash IN (
       SELECT token_hash FROM settings_sessions
        WHERE created_at < ? OR ended_at < ? OR last_seen_at < ?
        LIMIT ${PURGE_BATCH})`,
    [new Date(before.getTime() - SETTINGS_SESSION_LIFETIME_MS), before, new Date(before.getTime() - SETTINGS_SESSION_IDLE_MS)],
  );
}

/**
 * Exchanges a sign-in link's token for a new session of its account, once: the link is marked
 * used in the same transaction. SettingsLinkInvalidError (401) for a token never issued or
 * altered, SettingsLinkGoneError (410) for one already used or expired.
 */
export async function exchangeSettingsLink(db: Db, token: string): Promise<{ sessionToken: string; accountId: string }> {
  if (!wellFormed(token, LINK_PREFIX)) throw new SettingsLinkInvalidError(INVALID_LINK);
  const tokenHash = hashApiKey(token);
  return db.transaction(async (tx) => {
    const [used] = (await tx('settings_links')
      .where({ token_hash: tokenHash })
      .whereNull('used_at')
      .where('expires_at', '>', tx.raw('now()'))
      .update({ used_at: tx.raw('now()') })
      .returning(['account_id'])) as Array<{ account_id: string }>;
    if (!used) {
      const known = (await tx('settings_links').where({ token_hash: tokenHash }).first('used_at')) as { used_at: Date | null } | undefined;
      if (!known) throw new SettingsLinkInvalidError(INVALID_LINK);
      throw new SettingsLinkGoneError(known.used_at ? USED_LINK : EXPIRED_LINK);
    }
    const sessionToken = newToken(SESSION_PREFIX);
    await tx('settings_sessions').insert({ token_hash: hashApiKey(sessionToken), account_id: used.account_id });
    return { sessionToken, accountId: used.account_id };
  });
}

/**
 * The account of a live session, touching its last-seen time; undefined for a token that is
 * unknown, ended (signed out), idle for SETTINGS_SESSION_IDLE_MS or older than
 * SETTINGS_SESSION_LIFETIME_MS. One statement.
 */
export async function findSettingsSession(db: Db, sessionToken: string): Promise<{ accountId: string; accountName: string } | undefined> {
  if (!wellFormed(sessionToken, SESSION_PREFIX)) return undefined;
  const { rows } = (await db.raw(
    `UPDATE settings_sessions s SET last_seen_at = now()
       FROM accounts a
      WHERE s.token_hash = ? AND a.id = s.account_id AND s.ended_at IS NULL
        AND s.last_seen_at > now() - make_interval(secs => ?) AND s.created_at > now() - make_interval(secs => ?)
      RETURNING s.account_id, a.name`,
    [hashApiKey(sessionToken), SETTINGS_SESSION_IDLE_MS / 1000, SETTINGS_SESSION_LIFETIME_MS / 1000],
  )) as { rows: Array<{ account_id: string; name: string }> };
  const [row] = rows;
  return row ? { accountId: row.account_id, accountName: row.name } : undefined;
}

/**
 * The account a sign-in link opens, without using the link: for the page that asks before it is
 * used. The same errors as exchangeSettingsLink.
 */
export async function inspectSettingsLink(db: Db, token: string): Promise<{ accountId: string; accountName: string }> {
  if (!wellFormed(token, LINK_PREFIX)) throw new SettingsLinkInvalidError(INVALID_LINK);
  const row = (await db('settings_links as l')
    .join('accounts as a', 'a.id', 'l.account_id')
    .where({ 'l.token_hash': hashApiKey(token) })
    .first('l.account_id', 'a.name', 'l.used_at', db.raw('l.expires_at <= now() AS expired'))) as
    | { account_id: string; name: string; used_at: Date | null; expired: boolean }
    | undefined;
  if (!row) throw new SettingsLinkInvalidError(INVALID_LINK);
  if (row.used_at) throw new SettingsLinkGoneError(USED_LINK);
  if (row.expired) throw new SettingsLinkGoneError(EXPIRED_LINK);
  return { accountId: row.account_id, accountName: row.name };
}

/** Ends a session (Sign out); ending one already ended does nothing. */
export async function endSettingsSession(db: Db, sessionToken: string): Promise<void> {
  if (!wellFormed(sessionToken, SESSION_PREFIX)) return;
  await db('settings_sessions').where({ token_hash: hashApiKey(sessionToken) }).whereNull('ended_at').update({ ended_at: db.raw('now()') });
}

/** The CSRF token of a session: derived from the session's own secret token, so it is bound to that session and stored nowhere. */
export function settingsCsrfToken(sessionToken: string): string {
  return createHmac('sha256', sessionToken).update('settings csrf v1').digest('base64url');
}

/** True when `presented` is the session's CSRF token (constant-time). */
export function isSettingsCsrfToken(sessionToken: string, presented: unknown): boolean {
  if (typeof presented !== 'string') return false;
  const expected = Buffer.from(settingsCsrfToken(sessionToken));
  const given = Buffer.from(presented);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** A new single-use token for one rendering of a create form. */
export function newSettingsFormToken(): string {
  return randomBytes(18).toString('base64url');
}

/**
 * Marks a create form's token used by this session: true the first time, false when the form was
 * sent before (a reload, Back then Forward) or the token is not one a form carries, so the
 * caller creates nothing a second time.
 */
export async function useSettingsFormToken(db: Db, sessionToken: string, formToken: unknown): Promise<boolean> {
  if (typeof formToken !== 'string' || !/^[A-Za-z0-9_-]{24}$/.test(formToken)) return false;
  const inserted = await db.raw(
    'INSERT INTO settings_used_forms (session_hash, form_token) VALUES (?, ?) ON CONFLICT DO NOTHING RETURNING 1',
    [hashApiKey(sessionToken), formToken],
  );
  return (inserted.rows as unknown[]).length > 0;
}

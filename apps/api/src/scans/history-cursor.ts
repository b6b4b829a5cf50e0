import { InvalidQueryError, type HistoryPosition } from '@svc/core';
import { ID_SHAPE } from '../http/path-params.js';
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const malformed = () => new InvalidQueryError('cursor', 'cursor must be the nextCursor of a previous page, unchanged.');

/** The opaque cursor of a history page: base64url of `[completedAtIso, id]` of the page's last scan. */
export function encodeHistoryCursor(position: HistoryPosition): string {
  return Buffer.from(JSON.stringify([position.completedAt.toISOString(), position.id]), 'utf8').toString('base64url');
}

/** Reads a cursor back; anything that is not one we made is invalid_query naming `cursor`. */
export function decodeHistoryCursor(cursor: string): HistoryPosition {
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw malformed();
  }
  if (!Array.isArray(decoded) || decoded.length !== 2) throw malformed();
  const [at, id] = decoded as unknown[];
  if (typeof at !== 'string' || !ISO_MS.test(at) || typeof id !== 'string' || !ID_SHAPE.test(id)) throw malformed();
  const completedAt = new Date(at);
  // A string of the right shape can still name no instant (month 13) or a different one (Feb 30).
  if (Number.isNaN(completedAt.getTime()) || completedAt.toISOString() !== at) throw malformed();
  return { completedAt, id };
}

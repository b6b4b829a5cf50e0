import { InvalidQueryError, type DeliveryPosition } from '@svc/core';

/** Ids we issue are letters, digits, `_` and `-` (the same shape path ids are held to). */
const ID_SHAPE = /^[A-Za-z0-9_-]{1,128}$/;
/** Exactly what Date#toISOString prints, so a cursor round-trips to the millisecond it was made from. */
const ISO_MILLIS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const BAD_CURSOR = 'cursor must be the nextCursor of a previous page, unchanged, given once.';

/**
 * The log's position as an opaque cursor: base64url of `[createdAtIso, id]`. Clients must not
 * build or parse it; only its being opaque is promised.
 */
export function encodeDeliveryCursor(position: DeliveryPosition): string {
  return Buffer.from(JSON.stringify([position.createdAt.toISOString(), position.id]), 'utf8').toString('base64url');
}

/** Decodes a cursor made by encodeDeliveryCursor; anything else is invalid_query naming `cursor`. */
export function decodeDeliveryCursor(cursor: string): DeliveryPosition {
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw new InvalidQueryError('cursor', BAD_CURSOR);
  }
  if (!Array.isArray(decoded) || decoded.length !== 2) throw new InvalidQueryError('cursor', BAD_CURSOR);
  const [createdAt, id] = decoded as unknown[];
  if (typeof createdAt !== 'string' || !ISO_MILLIS.test(createdAt) || typeof id !== 'string' || !ID_SHAPE.test(id)) {
    throw new InvalidQueryError('cursor', BAD_CURSOR);
  }
  const at = new Date(createdAt);
  // Refuses dates that match the shape but do not exist (2026-02-31) or do not round-trip.
  if (Number.isNaN(at.getTime()) || at.toISOString() !== createdAt) throw new InvalidQueryError('cursor', BAD_CURSOR);
  return { createdAt: at, id };
}

import { InvalidQueryError } from '@svc/core';
import { ID_SHAPE } from './path-params.js';

/** Exactly what Date#toISOString prints, so a cursor round-trips to the millisecond it was made from. */
const ISO_MILLIS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** A keyset position: the time a page is ordered by and the id that breaks its ties. */
export interface Position {
  at: Date;
  id: string;
}

/**
 * The opaque cursor of a keyset-paged list: base64url of `[atIso, id]`. Clients must not build
 * or parse it; only its being opaque is promised. Shared by the score history and the delivery log.
 */
export function encodePositionCursor(position: Position): string {
  return Buffer.from(JSON.stringify([position.at.toISOString(), position.id]), 'utf8').toString('base64url');
}

/** Reads a cursor made by encodePositionCursor; anything else is invalid_query naming `cursor` with `message`. */
export function decodePositionCursor(cursor: string, message: string): Position {
  const bad = () => new InvalidQueryError('cursor', message);
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw bad();
  }
  if (!Array.isArray(decoded) || decoded.length !== 2) throw bad();
  const [iso, id] = decoded as unknown[];
  if (typeof iso !== 'string' || !ISO_MILLIS.test(iso) || typeof id !== 'string' || !ID_SHAPE.test(id)) throw bad();
  const at = new Date(iso);
  // Refuses dates that match the shape but do not exist (2026-02-31) or do not round-trip.
  if (Number.isNaN(at.getTime()) || at.toISOString() !== iso) throw bad();
  return { at, id };
}

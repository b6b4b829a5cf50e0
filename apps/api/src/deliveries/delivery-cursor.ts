import type { DeliveryPosition } from '@svc/core';
import { decodePositionCursor, encodePositionCursor } from '../http/position-cursor.js';

const BAD_CURSOR = 'cursor must be the nextCursor of a previous page, unchanged, given once.';

/**
 * The log's position as an opaque cursor: base64url of `[createdAtIso, id]`. Clients must not
 * build or parse it; only its being opaque is promised.
 */
export function encodeDeliveryCursor(position: DeliveryPosition): string {
  return encodePositionCursor({ at: position.createdAt, id: position.id });
}

/** Decodes a cursor made by encodeDeliveryCursor; anything else is invalid_query naming `cursor`. */
export function decodeDeliveryCursor(cursor: string): DeliveryPosition {
  const { at, id } = decodePositionCursor(cursor, BAD_CURSOR);
  return { createdAt: at, id };
}

import type { HistoryPosition } from '@svc/core';
import { decodePositionCursor, encodePositionCursor } from '../http/position-cursor.js';

const BAD_CURSOR = 'cursor must be the nextCursor of a previous page, unchanged.';

/** The opaque cursor of a history page: the page's last scan as `(completedAt, id)`. */
export function encodeHistoryCursor(position: HistoryPosition): string {
  return encodePositionCursor({ at: position.completedAt, id: position.id });
}

/** Reads a cursor back; anything that is not one we made is invalid_query naming `cursor`. */
export function decodeHistoryCursor(cursor: string): HistoryPosition {
  const { at, id } = decodePositionCursor(cursor, BAD_CURSOR);
  return { completedAt: at, id };
}

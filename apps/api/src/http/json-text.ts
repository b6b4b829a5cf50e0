import type { Response } from 'express';

/**
 * Answers with JSON that is already text (written by Postgres), exactly as res.json answers:
 * the same Content-Type (application/json; charset=utf-8, set by res.send), Content-Length and
 * HEAD / conditional handling, without parsing the text into objects only to stringify them again.
 * The app sets no json replacer, spaces or escape, so res.json would write the same bytes.
 */
export function sendJsonText(res: Response, json: string): void {
  if (!res.get('Content-Type')) res.set('Content-Type', 'application/json');
  res.send(json);
}

import type { Response } from 'express';

const JSON_UTF8 = 'application/json; charset=utf-8';

/**
 * Answers with JSON that is already text (written by Postgres), exactly as res.json answers:
 * the same Content-Type (application/json; charset=utf-8), Content-Length, HEAD and conditional
 * (304) handling, without parsing the text into objects only to stringify them again. The app
 * sets no json replacer, spaces or escape, so res.json would write the same bytes
 * (json-text.test compares the two answer by answer).
 *
 * The common case (a 200 with no Content-Type, Transfer-Encoding or ETag machinery, no
 * conditional header) is written straight to Node's response: Express's res.send parses and
 * formats the Content-Type again to add the charset, looks the type up in its MIME table, copies
 * a body of 1,000 characters or more into a Buffer, and reads each header back, ~10 µs of API
 * CPU per request on the bench (ADR 12). Anything else goes through res.send unchanged.
 */
export function sendJsonText(res: Response, json: string): void {
  const req = res.req;
  const plain =
    res.statusCode === 200 &&
    res.getHeader('Content-Type') === undefined &&
    res.getHeader('Transfer-Encoding') === undefined &&
    res.getHeader('ETag') === undefined &&
    typeof res.app.get('etag fn') !== 'function' &&
    req.headers['if-none-match'] === undefined &&
    req.headers['if-modified-since'] === undefined;
  if (!plain) {
    if (!res.get('Content-Type')) res.set('Content-Type', 'application/json');
    res.send(json);
    return;
  }
  res.setHeader('Content-Type', JSON_UTF8);
  res.setHeader('Content-Length', Buffer.byteLength(json, 'utf8'));
  if (req.method === 'HEAD') res.end();
  else res.end(json, 'utf8');
}

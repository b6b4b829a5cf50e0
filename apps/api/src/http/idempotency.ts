import { createHash } from 'node:crypto';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { InvalidIdempotencyKeyError, type Db, type Logger, type SecretBox } from '@svc/core';
import { accountOf } from '../auth/authenticate.js';

/** 1–255 printable ASCII characters (space included, as in the header's value). */
const KEY_SHAPE = /^[\x20-\x7E]{1,255}$/;

/**
 * The SHA-256 of a request's decoded body, noted by the body parser's verify (absent: no body was
 * read); only for a request with an Idempotency-Key, the one thing that compares bodies.
 */
export function noteBodyDigest(req: Request, res: Response, body: Buffer): void {
  if (req.headers['idempotency-key'] !== undefined) res.locals.bodySha256 = createHash('sha256').update(body).digest('hex');
}

/** What makes two requests "the same" for a key: method, path and the body's bytes. */
function fingerprintOf(req: Request, res: Response): string {
  const body = (res.locals.bodySha256 as string | undefined) ?? createHash('sha256').digest('hex');
  return createHash('sha256').update(`${req.method}\n${req.baseUrl}${req.path}\n${body}`).digest('hex');
}

/**
 * `Idempotency-Key` on a POST or PATCH of /api/v1 (docs/api-behaviour.md, "Retrying a POST or
 * PATCH"): placed after a route's body parser and before its handler. Without the header it does
 * nothing. With it, the first request is answered as usual and its answer (status and JSON body,
 * any status but a 5xx) stored for 24 hours; the same request again gets that answer with
 * `Idempotent-Replayed: true` and does nothing else. The answer is stored before it is sent, so a
 * client that got it can only ever get it again. A request whose client went away still runs to
 * its end and stores its answer, which the client's retry then gets (the lost-response case the
 * key exists for). A 5xx lets go of the key: a retry runs afresh. An answer that cannot be stored
 * is not sent either (the client gets a bare 500), and the key stays held until it expires, like
 * the key of a process that died mid-request: what it did may have been done, so it is never run
 * again under that key.
 */
export function idempotentRequest(deps: { db: Db; logger: Pick<Logger, 'warn'>; secrets: SecretBox }): RequestHandler {
  return async function idempotentRequest(req: Request, res: Response, next: NextFunction): Promise<void> {
    const headers = req.headers['idempotency-key'];
    if (headers === undefined) return next();
    const key = Array.isArray(headers) ? undefined : headers;
    if (key === undefined || !KEY_SHAPE.test(key) || req.rawHeaders.filter((_, i) => i % 2 === 0 && /^idempotency-key$/i.test(req.rawHeaders[i]!)).length > 1) {
      throw new InvalidIdempotencyKeyError('The Idempotency-Key header must be given once, as 1 to 255 printable ASCII characters (a UUID, say).');
    }
    const keys = accountOf(res, deps.db).idempotency;
    const started = await keys.start(key, fingerprintOf(req, res), deps.secrets);
    if (started.kind === 'replay') {
      res.status(started.status).set('Idempotent-Replayed', 'true').type('application/json').send(started.body);
      return;
    }
    let settled = false;
    /** Runs the key's bookkeeping; true when it was done. */
    const settle = (work: () => Promise<void>): Promise<boolean> => {
      settled = true;
      return work().then(
        () => true,
        (error: Error) => {
          deps.logger.warn('could not store the answer of an idempotent request; its key stays held until it expires', { error: error.message });
          return false;
        },
      );
    };
    const json = res.json.bind(res);
    const send = res.send.bind(res);
    res.json = (body: unknown) => {
      const status = res.statusCode;
      if (status >= 500) {
        void settle(() => keys.abandon(key)).then(() => json(body));
        return res;
      }
      void settle(() => keys.finish(key, status, body, deps.secrets)).then((stored) => {
        if (stored) json(body);
        else res.status(500).type('text/plain').send('Internal Server Error');
      });
      return res;
    };
    // The bare 5xx is sent as plain text, not through res.json: let go of the key first.
    res.send = (body?: unknown) => {
      if (settled || res.statusCode < 500) return send(body);
      void settle(() => keys.abandon(key)).then(() => send(body));
      return res;
    };
    next();
  };
}

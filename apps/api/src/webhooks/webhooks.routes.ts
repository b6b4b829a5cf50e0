import express, { Router, type NextFunction, type Request, type Response } from 'express';
import { ValidationError, type Db, type Queues } from '@svc/core';
import { accountOf, requireScope } from '../auth/authenticate.js';
import { sendJsonText } from '../http/json-text.js';
import { requireIdShape } from '../http/path-params.js';
import { validateBody } from '../http/openapi-validators.js';

/**
 * Bodies past this get 413. Far above what a subscription needs, so that an over-long url is
 * answered by its own rule (invalid_url) rather than by the size limit.
 */
export const WEBHOOK_BODY_LIMIT = '1mb';

const EMPTY_BODY_MESSAGE = 'The request body is empty; send a JSON object with url and events.';

/**
 * Clients that forget the Content-Type still get their JSON read; anything else fails as
 * invalid_body. The parser reads an empty body as `{}` and leaves a request without one
 * undefined, so the decoded length (after any Content-Encoding) is noted to tell "no body" (none
 * announced, a chunked body of zero bytes, a gzip stream that inflates to nothing) from a body
 * that is an empty object.
 */
const jsonBody = express.json({
  limit: WEBHOOK_BODY_LIMIT,
  strict: true,
  type: () => true,
  verify: (_req, res, body) => {
    (res as Response).locals.decodedBodyBytes = body.length;
  },
});

function requireDecodedBody(_req: Request, res: Response, next: NextFunction): void {
  if (!res.locals.decodedBodyBytes) throw new ValidationError('invalid_body', EMPTY_BODY_MESSAGE);
  next();
}

const validateCreateWebhook = validateBody<{ url: string; events: string[] }>('createWebhook');

/** A new subscription's url and events by the document's rules (POST /webhooks, the Settings form); repeated events are dropped, as the document says. */
export function parseCreateSubscription(body: unknown): { url: string; events: string[] } {
  const { url, events } = validateCreateWebhook(body);
  return { url, events: [...new Set(events)] };
}

/** Spec §4.3–§4.5. */
export function webhooksRoutes(deps: { db: Db; queues: Pick<Queues, 'delivery'> }, router: Router = Router()): Router {
  router.post('/webhooks', requireScope('write:webhooks'), jsonBody, requireDecodedBody, async (req, res) => {
    const sub = await accountOf(res, deps.db).webhooks.create(parseCreateSubscription(req.body));
    res.status(201).json({
      data: {
        subscription: { id: sub.id, url: sub.url, events: sub.events, secret: sub.secret, createdAt: sub.createdAt.toISOString() },
      },
    });
  });
  router.get('/webhooks', requireScope('read:webhooks'), async (_req, res) => {
    // The JSON text comes from Postgres (ADR 12): no presenter here.
    const subscriptions = await accountOf(res, deps.db).webhooks.listJson();
    sendJsonText(res, `{"data":{"subscriptions":${subscriptions}}}`);
  });
  router.delete(
    '/webhooks/:subscriptionId',
    requireScope('write:webhooks'),
    requireIdShape('subscriptionId', 'No webhook subscription with this id exists in your account.'),
    async (req, res) => {
      const id = String(req.params.subscriptionId);
      await accountOf(res, deps.db).webhooks.revoke(id, deps);
      res.json({ data: { deleted: true, id } });
    },
  );
  return router;
}

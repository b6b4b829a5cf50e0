import express, { Router, type NextFunction, type Request, type Response } from 'express';
import { DEFAULT_ROTATION_OVERLAP_SECONDS, standardWebhooksSecret, ValidationError, type Db, type Logger, type Queues, type SecretBox, type SubscriptionListing } from '@svc/core';
import { accountOf, requireScope } from '../auth/authenticate.js';
import { idempotentRequest, noteBodyDigest } from '../http/idempotency.js';
import { sendJsonText } from '../http/json-text.js';
import { requireIdShape } from '../http/path-params.js';
import { validateBody } from '../http/openapi-validators.js';
import { iso } from '../http/iso.js';

/**
 * Bodies past this get 413. Far above what a subscription needs, so that an over-long url is
 * answered by its own rule (invalid_url) rather than by the size limit.
 */
export const WEBHOOK_BODY_LIMIT = '1mb';

const EMPTY_BODY_MESSAGE = 'The request body is empty; send a JSON object.';

/**
 * Clients that forget the Content-Type still get their JSON read; anything else fails as
 * invalid_body. The parser reads an empty body as `{}` and leaves a request without one
 * undefined, so the decoded length (after any Content-Encoding) is noted to tell "no body" (none
 * announced, a chunked body of zero bytes, a gzip stream that inflates to nothing) from a body
 * that is an empty object; and its digest, which an Idempotency-Key compares.
 */
const jsonBody = express.json({
  limit: WEBHOOK_BODY_LIMIT,
  strict: true,
  type: () => true,
  verify: (req, res, body) => {
    (res as Response).locals.decodedBodyBytes = body.length;
    noteBodyDigest(req as Request, res as Response, body);
  },
});

function requireDecodedBody(_req: Request, res: Response, next: NextFunction): void {
  if (!res.locals.decodedBodyBytes) throw new ValidationError('invalid_body', EMPTY_BODY_MESSAGE);
  next();
}

/** An optional body: none at all reads as `{}`. */
const bodyOrEmpty = (req: Request, res: Response): unknown => (res.locals.decodedBodyBytes ? req.body : {});

const validateCreateWebhook = validateBody<{ url: string; events: string[] }>('createWebhook');
const validateUpdateWebhook = validateBody<{ url?: string; events?: string[] }>('updateWebhook');
const validateRotation = validateBody<{ overlapSeconds?: number }>('rotateWebhookSecret');
const validateRecovery = validateBody<{ since: string; until?: string; dryRun?: boolean }>('recoverWebhookDeliveries');

/** A new subscription's url and events by the document's rules (POST /webhooks, the Settings form); repeated events are dropped, as the document says. */
export function parseCreateSubscription(body: unknown): { url: string; events: string[] } {
  const { url, events } = validateCreateWebhook(body);
  return { url, events: [...new Set(events)] };
}

function parseUpdate(body: unknown): { url?: string; events?: string[] } {
  const { url, events } = validateUpdateWebhook(body);
  return { ...(url === undefined ? {} : { url }), ...(events === undefined ? {} : { events: [...new Set(events)] }) };
}

/** The recovery window: until defaults to now and must come after since. */
function parseRecovery(body: unknown): { since: Date; until: Date; dryRun: boolean } {
  const input = validateRecovery(body);
  const since = new Date(input.since);
  const until = input.until === undefined ? new Date() : new Date(input.until);
  if (!(until.getTime() > since.getTime())) throw new ValidationError('invalid_body', 'until must be after since (until is now when it is absent).');
  return { since, until, dryRun: input.dryRun === true };
}


function presentSubscription(sub: SubscriptionListing) {
  return {
    id: sub.id,
    url: sub.url,
    events: sub.events,
    createdAt: sub.createdAt.toISOString(),
    lastDeliveryAt: iso(sub.lastDeliveryAt),
    failureCount: sub.failureCount,
    status: sub.status,
  };
}

/** Spec §4.3–§4.5. */
export function webhooksRoutes(
  deps: { db: Db; queues: Pick<Queues, 'deliveries'>; logger: Pick<Logger, 'warn'>; secrets: SecretBox },
  router: Router = Router(),
): Router {
  const idempotent = idempotentRequest(deps);
  const subscriptionId = requireIdShape('subscriptionId', 'No webhook subscription with this id exists in your account.');
  router.post('/webhooks', requireScope('write:webhooks'), jsonBody, requireDecodedBody, idempotent, async (req, res) => {
    const sub = await accountOf(res, deps.db).webhooks.create(parseCreateSubscription(req.body), deps.secrets);
    res.status(201).json({
      data: {
        subscription: {
          id: sub.id,
          url: sub.url,
          events: sub.events,
          secret: sub.secret,
          standardWebhooksSecret: standardWebhooksSecret(sub.secret),
          createdAt: sub.createdAt.toISOString(),
        },
      },
    });
  });
  router.patch('/webhooks/:subscriptionId', requireScope('write:webhooks'), subscriptionId, jsonBody, requireDecodedBody, idempotent, async (req, res) => {
    const sub = await accountOf(res, deps.db).webhooks.update(String(req.params.subscriptionId), parseUpdate(req.body));
    res.json({ data: { subscription: presentSubscription(sub) } });
  });
  router.post('/webhooks/:subscriptionId/rotate-secret', requireScope('write:webhooks'), subscriptionId, jsonBody, idempotent, async (req, res) => {
    const { overlapSeconds = DEFAULT_ROTATION_OVERLAP_SECONDS } = validateRotation(bodyOrEmpty(req, res));
    const rotated = await accountOf(res, deps.db).webhooks.rotateSecret(String(req.params.subscriptionId), overlapSeconds, deps.secrets);
    res.json({
      data: {
        subscription: {
          id: rotated.id,
          secret: rotated.secret,
          standardWebhooksSecret: standardWebhooksSecret(rotated.secret),
          previousSecretExpiresAt: iso(rotated.previousSecretExpiresAt),
        },
      },
    });
  });
  router.post('/webhooks/:subscriptionId/recover', requireScope('write:webhooks'), subscriptionId, jsonBody, requireDecodedBody, idempotent, async (req, res) => {
    const recovery = await accountOf(res, deps.db).deliveries.recover(String(req.params.subscriptionId), parseRecovery(req.body), deps);
    res.status(202).json({ data: { recovery: { count: recovery.count, since: recovery.since.toISOString(), until: recovery.until.toISOString() } } });
  });
  router.get('/webhooks', requireScope('read:webhooks'), async (_req, res) => {
    // The JSON text comes from Postgres (ADR 12): no presenter here.
    const subscriptions = await accountOf(res, deps.db).webhooks.listJson();
    sendJsonText(res, `{"data":{"subscriptions":${subscriptions}}}`);
  });
  router.delete(
    '/webhooks/:subscriptionId',
    requireScope('write:webhooks'),
    subscriptionId,
    async (req, res) => {
      const id = String(req.params.subscriptionId);
      await accountOf(res, deps.db).webhooks.revoke(id, deps);
      res.json({ data: { deleted: true, id } });
    },
  );
  return router;
}

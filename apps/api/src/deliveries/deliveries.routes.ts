import { Router } from 'express';
import type { Db, Logger, Queues, SecretBox } from '@svc/core';
import { accountOf, requireScope } from '../auth/authenticate.js';
import { idempotentRequest } from '../http/idempotency.js';
import { requireIdShape } from '../http/path-params.js';
import { decodeDeliveryCursor, encodeDeliveryCursor } from './delivery-cursor.js';
import { presentDelivery, presentDeliveryDetail } from './deliveries.presenter.js';
import { validateQuery } from '../http/openapi-validators.js';
import type { DeliveryListQuery } from './deliveries.schemas.js';

const parseDeliveryListQuery = validateQuery<DeliveryListQuery>('listWebhookDeliveries');

const NO_SUBSCRIPTION = 'No webhook subscription with this id exists in your account.';
const NO_DELIVERY = 'No delivery with this id exists for this webhook subscription.';

/** Issue 10: a subscription's delivery log, one delivery, and redelivery. */
export function deliveriesRoutes(
  deps: { db: Db; queues: Pick<Queues, 'deliveries'>; logger: Pick<Logger, 'warn'>; secrets: SecretBox },
  router: Router = Router(),
): Router {
  const subscriptionId = requireIdShape('subscriptionId', NO_SUBSCRIPTION);
  const deliveryId = requireIdShape('deliveryId', NO_DELIVERY);
  const idempotent = idempotentRequest(deps);

  router.get('/webhooks/:subscriptionId/deliveries', requireScope('read:webhooks'), subscriptionId, async (req, res) => {
    const query = parseDeliveryListQuery(req.query);
    const page = await accountOf(res, deps.db).deliveries.list(String(req.params.subscriptionId), {
      limit: query.limit,
      after: query.cursor === undefined ? undefined : decodeDeliveryCursor(query.cursor),
      status: query.status,
    });
    res.json({
      data: { deliveries: page.deliveries.map(presentDelivery), nextCursor: page.next ? encodeDeliveryCursor(page.next) : null },
    });
  });

  router.get(
    '/webhooks/:subscriptionId/deliveries/:deliveryId',
    requireScope('read:webhooks'),
    subscriptionId,
    deliveryId,
    async (req, res) => {
      const delivery = await accountOf(res, deps.db).deliveries.get(String(req.params.subscriptionId), String(req.params.deliveryId));
      res.json({ data: { delivery: presentDeliveryDetail(delivery) } });
    },
  );

  router.post(
    '/webhooks/:subscriptionId/deliveries/:deliveryId/redeliver',
    requireScope('write:webhooks'),
    subscriptionId,
    deliveryId,
    idempotent,
    async (req, res) => {
      const { delivery } = await accountOf(res, deps.db).deliveries.redeliver(String(req.params.subscriptionId), String(req.params.deliveryId), deps);
      res.status(202).json({ data: { delivery: presentDelivery(delivery) } });
    },
  );
  return router;
}

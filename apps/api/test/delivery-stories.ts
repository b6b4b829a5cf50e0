import request from 'supertest';
import { completeAiMonitorRun, type Scope } from '@svc/core';
import { createApiKey } from '@svc/core/operator';
import { uniqueTag, waitFor } from '@svc/core/testing';
import { createHarness, secretsKeyOverrides, seedTenant, type DeliveryRow, type Harness } from '@svc/dispatcher/test-support';
import { bearer, createTestApi, type TestApi } from './support.js';

/**
 * A harness (its fast retry schedule unless `harness` says otherwise) with its dispatcher
 * running, and an API process on it: what most stories of a file share, started in its beforeAll.
 */
export async function startStage(options: { harness?: Record<string, string>; dispatcher?: Record<string, string> } = {}): Promise<{ h: Harness; api: TestApi }> {
  const h = await createHarness(options.harness);
  h.startDispatcher(options.dispatcher);
  return { h, api: apiOn(h) };
}

/** Stops what startStage started (afterAll), whatever of it did start. */
export async function stopStage(stage: { h?: Harness; api?: TestApi }): Promise<void> {
  await stage.api?.close();
  await stage.h?.close();
}

/** An API process on the harness's database and queues, so what it queues the harness's dispatcher sends. */
export function apiOn(h: Harness): TestApi {
  return createTestApi(
    { DATABASE_URL: h.config.databaseUrl, QUEUE_PREFIX: h.config.queuePrefix, RATE_LIMIT_PER_MINUTE: '100000', ...secretsKeyOverrides(h.config) },
    { db: h.db },
  );
}

/** A tenant of the harness (account, site) with an API key of the given scopes. */
export async function tenantWithKey(h: Harness, scopes: Scope[] = ['read:webhooks', 'write:webhooks']) {
  const tenant = await seedTenant(h);
  const { key } = await createApiKey(h.db, tenant.accountId, { name: `key ${uniqueTag()}`, scopes });
  return { ...tenant, key };
}

/** A GET or POST on the API with this key. */
export function call(api: TestApi, key: string) {
  return {
    get: (path: string) => request(api.app).get(path).set(bearer(key)),
    post: (path: string) => request(api.app).post(path).set(bearer(key)),
    delete: (path: string) => request(api.app).delete(path).set(bearer(key)),
  };
}

/** Fires one ai_check.completed for the tenant's site and returns its event id. */
export async function fireEvent(h: Harness, siteId: string): Promise<string> {
  const { eventId } = await completeAiMonitorRun({ db: h.db, queues: h.queues }, { siteId, compositeScore: 50 });
  return eventId;
}

/** Every delivery row of one event to one subscription, oldest first. */
export async function deliveriesOf(h: Harness, eventId: string, subscriptionId: string): Promise<DeliveryRow[]> {
  return h.db('deliveries').where({ event_id: eventId, subscription_id: subscriptionId }).orderBy([{ column: 'created_at' }, { column: 'id' }]);
}

/** Polls until the delivery row satisfies `until`, then returns it (assert outside). */
export async function waitForRow(h: Harness, deliveryId: string, until: (row: DeliveryRow) => boolean, what: string): Promise<DeliveryRow> {
  return waitFor(
    async () => {
      const row = (await h.db('deliveries').where({ id: deliveryId }).first()) as DeliveryRow | undefined;
      return row !== undefined && until(row) && row;
    },
    20_000,
    what,
  );
}

export const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

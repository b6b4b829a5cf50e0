import type { IncomingHttpHeaders } from 'node:http';
import request from 'supertest';
import { Webhook } from 'standardwebhooks';
import { newId, verifySignature, type Db } from '@svc/core';
import type { ReceivedRequest } from '@svc/dispatcher/test-support';
import { bearer, type TestApi } from './support.js';

/**
 * Helpers of the webhook self-service stories (rotation, recovery, PATCH, Idempotency-Key): what a
 * customer's receiver does with the secrets it holds, and the writing calls with an optional key.
 */

/** How a receiver configures any Standard Webhooks library with a secret the API returned. */
export const standardSecret = (secret: string) => `whsec_${Buffer.from(secret, 'utf8').toString('base64')}`;

/** True when a Standard Webhooks receiver holding only this secret accepts the request (the real `standardwebhooks` library). */
export function standardVerifies(body: Buffer, headers: IncomingHttpHeaders, secret: string): boolean {
  try {
    new Webhook(standardSecret(secret)).verify(body, headers as Record<string, string>);
    return true;
  } catch {
    return false;
  }
}

/** True when a receiver of the v1 scheme (X-Service-Signature) holding only this secret accepts the request. */
export function serviceVerifies(body: Buffer, headers: IncomingHttpHeaders, secret: string): boolean {
  return verifySignature(body, headers['x-service-signature'] as string, secret);
}

/** The `v1,…` signatures of a request's webhook-signature header, in their order. */
export const signaturesOf = (received: ReceivedRequest) => String(received.headers['webhook-signature'] ?? '').split(' ');

/** A writing call with this API key, and with an Idempotency-Key when one is given. */
export function write(api: TestApi, key: string, idempotencyKey?: string) {
  const keyed = (test: request.Test) => (idempotencyKey === undefined ? test : test.set('Idempotency-Key', idempotencyKey));
  return {
    post: (path: string) => keyed(request(api.app).post(path).set(bearer(key))),
    patch: (path: string) => keyed(request(api.app).patch(path).set(bearer(key))),
    get: (path: string) => request(api.app).get(path).set(bearer(key)),
    delete: (path: string) => request(api.app).delete(path).set(bearer(key)),
  };
}

/** Postgres's clock now (the one finished_at and the overlap's end are written with). */
export async function dbNow(db: Db): Promise<Date> {
  const { rows } = await db.raw('SELECT clock_timestamp() AS now');
  return rows[0].now as Date;
}

/**
 * Failed deliveries written in bulk, as an outage leaves them: `count` events of the account, each
 * with one delivery to the subscription that exhausted its 7 attempts, failed `stepMs` apart from
 * `firstFailedAt` on (oldest first). Each event's body names its own id, so a receiver can tell
 * the events apart. Returns the events' ids and the failed deliveries' ids, oldest first.
 */
export async function seedFailedDeliveries(
  db: Db,
  input: { accountId: string; subscriptionId: string; count: number; firstFailedAt: Date; stepMs: number },
): Promise<{ eventIds: string[]; deliveryIds: string[] }> {
  const eventIds = Array.from({ length: input.count }, () => newId('evt'));
  const deliveryIds = Array.from({ length: input.count }, () => newId('dlv'));
  for (let from = 0; from < input.count; from += 5_000) {
    const page = eventIds.slice(from, from + 5_000);
    await db.raw(
      `INSERT INTO events (id, account_id, type, body, fanned_out_at)
       SELECT e.id, :accountId, 'ai_check.completed', json_build_object('event', 'ai_check.completed', 'data', json_build_object('eventId', e.id, 'n', :from + e.n - 1))::text, clock_timestamp()
         FROM unnest(:ids::text[]) WITH ORDINALITY AS e(id, n)`,
      { accountId: input.accountId, ids: page, from },
    );
    await db.raw(
      `INSERT INTO deliveries (id, event_id, subscription_id, status, attempt_count, next_attempt_at, finished_at, failure_reason, created_at)
       SELECT d.id, e.id, :subscriptionId, 'failed', 7, NULL,
              :first::timestamptz + make_interval(secs => (:from + d.n - 1) * :stepMs / 1000.0), 'HTTP 500',
              :first::timestamptz - interval '1 hour'
         FROM unnest(:deliveryIds::text[]) WITH ORDINALITY AS d(id, n)
         JOIN unnest(:eventIds::text[]) WITH ORDINALITY AS e(id, n) ON e.n = d.n`,
      {
        subscriptionId: input.subscriptionId,
        deliveryIds: deliveryIds.slice(from, from + 5_000),
        eventIds: page,
        first: input.firstFailedAt,
        stepMs: input.stepMs,
        from,
      },
    );
  }
  return { eventIds, deliveryIds };
}

import type { Db } from '../db/knex.js';
import type { Logger } from '../logger.js';
import type { Queues } from '../queues/queues.js';
import type { RedisClient } from '../redis.js';
import { createApiKey, listApiKeys } from '../keys/key.repository.js';
import { revokeApiKeyEverywhere } from '../keys/key-revocation.js';
import { getLatestAiMonitorRun } from '../ai-monitor/ai-run.repository.js';
import { findSubscriptionDelivery, listSubscriptionDeliveries, type DeliveryPageQuery } from '../deliveries/delivery-history.repository.js';
import { redeliverSubscriptionDelivery } from '../deliveries/redeliver.js';
import { getScan, listScanHistory, type HistoryQuery } from '../scans/scan-history.repository.js';
import { getSiteDetailAsJson, listSitesAsJsonArray } from '../sites/site.repository.js';
import { revokeSubscription } from '../webhooks/revoke-subscription.js';
import { createSubscription, listSubscriptionsAsJsonArray, rotateSubscriptionSecret, updateSubscription } from '../webhooks/subscription.repository.js';
import { recoverSubscriptionDeliveries, type RecoveryWindow } from '../deliveries/recover.js';
import { abandonIdempotentRequest, finishIdempotentRequest, startIdempotentRequest } from '../idempotency/idempotency.repository.js';
import type { SecretBox } from '../secrets/secret-box.js';

/** What a key's revocation needs beside the database: the Redis its announcement goes to. */
export interface KeyRevocationDeps {
  redis: RedisClient;
  /** QUEUE_PREFIX: the API's limiter reads the revocation marker under it. */
  prefix: string;
}

/** What the account's writes that queue jobs need beside the database. */
export interface AccountQueueDeps {
  queues: Pick<Queues, 'deliveries'>;
  logger?: Pick<Logger, 'warn'>;
}

/**
 * The repositories of one account: every read and write the API makes, each bound to the
 * account, so a handler cannot reach another account's rows by forgetting a condition.
 */
export function forAccount(db: Db, accountId: string) {
  return {
    /** The account's Idempotency-Keys: a POST or PATCH answered once, replayed for 24 hours. */
    idempotency: {
      /** A replayed answer is opened with the process's SecretBox. */
      start: (key: string, fingerprint: string, secrets: SecretBox) => startIdempotentRequest(db, accountId, key, fingerprint, secrets),
      /** The answer is stored as the process's SecretBox seals (it may show a secret). */
      finish: (key: string, status: number, answer: unknown, secrets: SecretBox) => finishIdempotentRequest(db, accountId, key, status, answer, secrets),
      abandon: (key: string) => abandonIdempotentRequest(db, accountId, key),
    },
    keys: {
      create: (input: { name: string; scopes: readonly string[] }) => createApiKey(db, accountId, input),
      list: () => listApiKeys(db, accountId),
      revoke: (keyId: string, deps: KeyRevocationDeps) => revokeApiKeyEverywhere({ db, ...deps }, keyId, accountId),
    },
    sites: {
      /** The JSON array's text, written by Postgres (ADR 12). */
      listJson: () => listSitesAsJsonArray(db, accountId),
      /** The site object's JSON text, written by Postgres (ADR 12). */
      getJson: (siteId: string) => getSiteDetailAsJson(db, accountId, siteId),
    },
    scans: {
      history: (siteId: string, query: HistoryQuery) => listScanHistory(db, accountId, siteId, query),
      get: (scanId: string) => getScan(db, accountId, scanId),
    },
    aiMonitor: {
      latestRun: (siteId: string) => getLatestAiMonitorRun(db, accountId, siteId),
    },
    webhooks: {
      /** The new secret is stored as the process's SecretBox seals it. */
      create: (input: { url: string; events: readonly string[] }, secrets: SecretBox) => createSubscription(db, accountId, input, secrets),
      /** The JSON array's text, written by Postgres (ADR 12). */
      listJson: () => listSubscriptionsAsJsonArray(db, accountId),
      revoke: (subscriptionId: string, deps: AccountQueueDeps) => revokeSubscription({ db, queues: deps.queues }, accountId, subscriptionId),
      update: (subscriptionId: string, input: { url?: string; events?: readonly string[] }) => updateSubscription(db, accountId, subscriptionId, input),
      rotateSecret: (subscriptionId: string, overlapSeconds: number, secrets: SecretBox) =>
        rotateSubscriptionSecret(db, accountId, subscriptionId, overlapSeconds, secrets),
    },
    deliveries: {
      list: (subscriptionId: string, query: DeliveryPageQuery) => listSubscriptionDeliveries(db, accountId, subscriptionId, query),
      get: (subscriptionId: string, deliveryId: string) => findSubscriptionDelivery(db, accountId, subscriptionId, deliveryId),
      redeliver: (subscriptionId: string, deliveryId: string, deps: AccountQueueDeps) =>
        redeliverSubscriptionDelivery({ db, ...deps }, accountId, subscriptionId, deliveryId),
      recover: (subscriptionId: string, window: RecoveryWindow, deps: AccountQueueDeps) =>
        recoverSubscriptionDeliveries({ db, ...deps }, accountId, subscriptionId, window),
    },
  };
}

/** The account-bound repositories forAccount returns. */
export type AccountRepositories = ReturnType<typeof forAccount>;

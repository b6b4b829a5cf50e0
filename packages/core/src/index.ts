// @svc/core: what every process shares, and the one way to an account's data (forAccount).
// Functions that act on any account's rows live behind their own entry points:
// `@svc/core/operator` (svc, seeding, the bench) and `@svc/core/dispatcher` (claims, records,
// fan-out, sweep, retention). apps/api imports only this one (test/entry-points.test.ts).
export * from './config.js';
export * from './logger.js';
export * from './errors.js';
export * from './ids.js';
export * from './redis.js';
export * from './db/knex.js';
export * from './db/migrate.js';
export * from './db/pg-listener.js';

// Tenancy: the account-bound repositories, and the shapes they return.
export * from './accounts/for-account.js';
export type * from './accounts/account.repository.js';
export { SITE_STATUSES, SITES_LIST_LIMIT, type SiteStatus, type SiteSummary } from './sites/site.repository.js';
export type * from './scans/scan.repository.js';
export { SCAN_HISTORY_MAX_LIMIT, type HistoryScan, type HistoryPosition, type HistoryQuery, type HistoryPage } from './scans/scan-history.repository.js';
export type * from './ai-monitor/ai-run.repository.js';
export type * from './power-ups/deployment.repository.js';
export {
  AUTO_DISABLE_THRESHOLD,
  DEFAULT_ROTATION_OVERLAP_SECONDS,
  MAX_ROTATION_OVERLAP_SECONDS,
  type CreatedSubscription,
  type RotatedSecret,
  type SubscriptionListing,
  type SubscriptionStatus,
} from './webhooks/subscription.repository.js';
export { RECOVERY_MAX, type Recovery, type RecoveryWindow } from './deliveries/recover.js';
export { IDEMPOTENCY_KEY_TTL_SECONDS, type IdempotentStart } from './idempotency/idempotency.repository.js';
export type * from './deliveries/delivery-history.repository.js';
export type { Redelivery } from './deliveries/redeliver.js';
export * from './sites/domain.js';
export * from './scans/scan-inputs.js';
export * from './scores/score-breakdown.js';
export * from './ai-monitor/engine-scores.js';

// Authentication: a presented key is found by its hash before any account is known.
export * from './keys/api-key.js';
export { findActiveKeyByHash, touchApiKey, type AuthenticatedKey } from './keys/key.repository.js';
export * from './keys/key-revocation.js';
export * from './keys/revocation-listener.js';
export * from './keys/key-hash-prefixes.js';
export type { ApiKeyListing, CreatedApiKey } from './keys/key.repository.js';
// Settings sessions: a browser's session is found by its token before any account is known.
export {
  exchangeSettingsLink,
  inspectSettingsLink,
  findSettingsSession,
  endSettingsSession,
  settingsCsrfToken,
  isSettingsCsrfToken,
  newSettingsFormToken,
  useSettingsFormToken,
  SETTINGS_SESSION_IDLE_MS,
  SETTINGS_SESSION_LIFETIME_MS,
  SETTINGS_SIGN_IN_PATH,
  type SettingsLink,
} from './settings/settings-sessions.js';

// Events: producers call these in-process.
export * from './events/event-types.js';
export * from './events/producers.js';
export * from './deliveries/delivery-limits.js';
export * from './deliveries/response-excerpt.js';
export * from './signing/signature.js';
export * from './signing/signature-headers.js';
// Webhook secrets at rest: sealed with SECRETS_ENCRYPTION_KEY when it is set.
export * from './secrets/secret-box.js';
export { EncryptionKey, ENCRYPTION_KEY_BYTES } from './secrets/encryption-key.js';
export * from './queues/queues.js';
export * from './queues/enqueue-after-commit.js';

// Operations every process serves.
export * from './metrics/metrics-server.js';
export * from './metrics/operator-db.js';
export * from './metrics/pool-gauges.js';
export * from './metrics/process-registry.js';

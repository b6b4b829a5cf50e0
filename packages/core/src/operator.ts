// @svc/core/operator: functions that take any account's ids, for `svc`, for seeding tests and the
// bench, and for the main product's own back office. apps/api never imports this entry.
export * from './accounts/account.repository.js';
export * from './sites/site.repository.js';
export * from './scans/scan.repository.js';
export * from './scans/scan-history.repository.js';
export * from './keys/key.repository.js';
export * from './webhooks/subscription.repository.js';
export * from './webhooks/revoke-subscription.js';
export * from './webhooks/subscription-owner.js';
export * from './ai-monitor/ai-run.repository.js';
export * from './power-ups/deployment.repository.js';
export * from './deliveries/delivery-log.repository.js';
export * from './deliveries/delivery-history.repository.js';
export { redeliverSubscriptionDelivery, type RedeliveryDeps } from './deliveries/redeliver.js';
export * from './deliveries/operator-redeliver.js';
export * from './deliveries/recover.js';
export { createSettingsLink, SETTINGS_LINK_DEFAULT_TTL_SECONDS, SETTINGS_LINK_MAX_TTL_SECONDS } from './settings/settings-sessions.js';
export * from './secrets/reencrypt-secrets.js';

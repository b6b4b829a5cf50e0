import type { components } from './generated/openapi.js';

/** The schemas of the service's OpenAPI document, as generated (src/generated/openapi.ts). */
type Schemas = components['schemas'];

export type { components, paths, operations, webhooks } from './generated/openapi.js';

export type SiteSummary = Schemas['SiteSummary'];
export type SiteDetail = Schemas['SiteDetail'];
export type LatestScan = Schemas['LatestScan'];
export type ScanTrigger = Schemas['ScanTrigger'];
/** One completed scan of the score history. */
export type ScanHistoryEntry = Schemas['HistoryScan'];
/** One scan of any status, with its categories. */
export type ScanDetail = Schemas['Scan'];
export type ScanCategory = Schemas['ScanCategory'];
export type AiMonitorRun = Schemas['AiMonitorRun'];
export type EngineScore = Schemas['EngineScore'];
export type CreateWebhookRequest = Schemas['CreateWebhookRequest'];
export type SubscriptionCreated = Schemas['CreatedWebhookSubscription'];
export type SubscriptionListing = Schemas['WebhookSubscription'];
/** `url`, `events`, or both. */
export type UpdateWebhookRequest = Schemas['UpdateWebhookRequest'];
export type RotateWebhookSecretRequest = Schemas['RotateWebhookSecretRequest'];
export type RecoverWebhookRequest = Schemas['RecoverWebhookRequest'];
/** A rotation's answer: the new secret (both forms) and when the replaced one stops signing. */
export type RotatedSecret = Schemas['RotatedWebhookSecret'];
/** A recovery's answer: how many deliveries were sent again (or, for a dry run, would be) and the window. */
export type WebhookRecovery = Schemas['WebhookRecovery'];
export type Delivery = Schemas['Delivery'];
export type DeliveryDetail = Schemas['DeliveryDetail'];
export type DeliveryAttempt = Schemas['DeliveryAttempt'];
export type DeliveryAttemptDetail = Schemas['DeliveryAttemptDetail'];
export type DeliveryStatus = Delivery['status'];
/** The error codes the API documents; SiteVisibilityError.code may also be server_error, network_error or invalid_response. */
export type ApiErrorCode = Schemas['ErrorCode'];
export type EventType = Exclude<Schemas['WebhookEventList'][number], '*'>;

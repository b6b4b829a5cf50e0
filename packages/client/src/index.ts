export { SiteVisibilityClient, type ClientOptions, type ScanHistoryQuery, type DeliveryLogQuery, type RotateSecretOptions, type RecoverOptions } from './client.js';
export {
  AuthenticationError,
  ConflictError,
  NetworkError,
  NotFoundError,
  PermissionError,
  RateLimitError,
  ServerError,
  SiteVisibilityError,
  ValidationError,
  WebhookVerificationError,
  type ClientErrorCode,
  type ErrorCode,
  type WebhookVerificationReason,
} from './errors.js';
export type { RetryInfo, RetryReason, RequestOptions, TransportOptions } from './transport.js';
export { walkPages, type Page } from './paging.js';
export * from './types.js';
export * from './webhooks/events.js';
export { verifyWebhook, verifyWebhookDelivery, type VerifyOptions, type VerifiedDelivery, type HeaderSource, type WebhookSecrets } from './webhooks/verify.js';
export { createWebhookHandler, type WebhookHandlerOptions } from './webhooks/handler.js';

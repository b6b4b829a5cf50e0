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
// The whole of `@site-visibility/client/webhooks` (the verifier and the event types), for those who import the whole client.
export * from './webhooks/index.js';
export { createWebhookHandler, type WebhookHandlerOptions, type WebhookHandlerRequest, type WebhookHandlerResponse } from './webhooks/handler.js';

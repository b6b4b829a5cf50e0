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
// The verifier of `@site-visibility/client/webhooks`, the same functions, for those who import the whole client.
export {
  verifyWebhook,
  verifyWebhookDelivery,
  verifyWebhookRequest,
  type HeaderGetter,
  type HeaderSource,
  type RawBody,
  type VerifiedDelivery,
  type VerifyOptions,
  type VerifyRequestOptions,
  type WebhookBodyStream,
  type WebhookRequest,
  type WebhookSecrets,
} from './webhooks/index.js';
export { createWebhookHandler, type WebhookHandlerOptions, type WebhookHandlerRequest, type WebhookHandlerResponse } from './webhooks/handler.js';

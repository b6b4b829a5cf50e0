// `@site-visibility/client/webhooks`: verifying deliveries, and nothing else. Its whole import
// graph uses no Node built-in (Web Crypto, TextEncoder, Uint8Array), so it runs where webhooks are
// received: Node 20/22/24, Deno, Bun, Cloudflare Workers and other worker runtimes. (It also loads
// in a browser, which shows it needs nothing of Node; a webhook secret belongs on a server.)
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
} from './verify.js';
export { WebhookVerificationError, type WebhookVerificationReason } from '../errors.js';
export * from './events.js';

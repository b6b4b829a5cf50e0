import { walkPages, type Page } from './paging.js';
import { Transport, type RequestOptions, type TransportOptions } from './transport.js';
import type {
  AiMonitorRun,
  Delivery,
  DeliveryDetail,
  DeliveryStatus,
  CreateWebhookRequest,
  ScanDetail,
  ScanHistoryEntry,
  SiteDetail,
  SiteSummary,
  RecoverWebhookRequest,
  RotatedSecret,
  RotateWebhookSecretRequest,
  SubscriptionCreated,
  SubscriptionListing,
  UpdateWebhookRequest,
  WebhookRecovery,
} from './types.js';

export type ClientOptions = TransportOptions;

export interface ScanHistoryQuery {
  /** Only scans completed strictly after this moment (a checkpoint from the previous run). */
  since?: Date | string;
  /** Page size, 1..100 (default 100). */
  limit?: number;
}

/** `overlapSeconds` (0..604800; default, server side, 86400): how long the replaced secret keeps signing beside the new one. */
export type RotateSecretOptions = RotateWebhookSecretRequest;

/** The failure window, `since` included and `until` (default: now) excluded, as Dates or ISO 8601 strings with an offset; `dryRun` only counts. */
export type RecoverOptions = Omit<RecoverWebhookRequest, 'since' | 'until'> & { since: Date | string; until?: Date | string };

export interface DeliveryLogQuery {
  status?: DeliveryStatus;
  /** Page size, 1..100 (default 50). */
  limit?: number;
}

const seg = (id: string) => {
  if (typeof id !== 'string' || id === '') throw new TypeError('an id is required');
  return encodeURIComponent(id);
};

const iso = (value: Date | string | undefined) => (value instanceof Date ? value.toISOString() : value);

/**
 * The Site Visibility Service API v1. One method per endpoint; lists that page are async
 * iterators. Every failure is a SiteVisibilityError.
 *
 *     const client = new SiteVisibilityClient({ apiKey: process.env.SVC_API_KEY!, baseUrl: 'https://api.example.com' });
 *     for (const site of await client.sites.list()) console.log(site.domain);
 */
export class SiteVisibilityClient {
  private readonly http: Transport;

  constructor(options: ClientOptions) {
    this.http = new Transport(options);
  }

  readonly sites = {
    /** Up to 100 sites, most recently added first. Scope read:sites. */
    list: async (options: RequestOptions = {}): Promise<SiteSummary[]> =>
      (await this.http.request<{ sites: SiteSummary[] }>('GET', '/sites', options)).sites,
    /** One site with its latest completed scan. Scope read:sites. */
    get: async (siteId: string, options: RequestOptions = {}): Promise<SiteDetail> =>
      (await this.http.request<{ site: SiteDetail }>('GET', `/sites/${seg(siteId)}`, options)).site,
  };

  readonly scans = {
    /** Every completed scan of a site, latest first, across all pages. Scope read:scans. */
    history: (siteId: string, query: ScanHistoryQuery = {}, options: RequestOptions = {}): AsyncGenerator<ScanHistoryEntry, void, undefined> =>
      walkPages((cursor) => this.scans.historyPage(siteId, { ...query, cursor }, options)),
    /** One page of the score history. Scope read:scans. */
    historyPage: async (siteId: string, query: ScanHistoryQuery & { cursor?: string } = {}, options: RequestOptions = {}): Promise<Page<ScanHistoryEntry>> => {
      const data = await this.http.request<{ scans: ScanHistoryEntry[]; nextCursor: string | null }>('GET', `/sites/${seg(siteId)}/scans`, {
        ...options,
        query: { limit: query.limit, cursor: query.cursor, since: iso(query.since) },
      });
      return { items: data.scans, nextCursor: data.nextCursor };
    },
    /** One scan of any status, with its categories. Scope read:scans. */
    get: async (scanId: string, options: RequestOptions = {}): Promise<ScanDetail> =>
      (await this.http.request<{ scan: ScanDetail }>('GET', `/scans/${seg(scanId)}`, options)).scan,
  };

  readonly aiMonitor = {
    /** The latest completed AI Monitor run, or null when none has completed. Scope read:ai-monitor. */
    latest: async (siteId: string, options: RequestOptions = {}): Promise<AiMonitorRun | null> =>
      (await this.http.request<{ run: AiMonitorRun | null }>('GET', `/sites/${seg(siteId)}/ai-monitor/latest`, options)).run,
  };

  readonly webhooks = {
    /**
     * Creates a subscription. Store `secret` (or `standardWebhooksSecret`, the same
     * key for a Standard Webhooks library) at once: it is never shown again. Retried safely: its
     * Idempotency-Key makes a retry answer with the subscription the first try made. Scope write:webhooks.
     */
    create: async (input: CreateWebhookRequest, options: RequestOptions = {}): Promise<SubscriptionCreated> =>
      (await this.http.request<{ subscription: SubscriptionCreated }>('POST', '/webhooks', { ...options, body: input })).subscription,
    /**
     * Changes a subscription's url, events, or both; its history, failure count and secret stay,
     * and attempts already queued go to the new url. An auto-disabled subscription is refused
     * (`subscription_disabled`). Scope write:webhooks.
     */
    update: async (subscriptionId: string, input: UpdateWebhookRequest, options: RequestOptions = {}): Promise<SubscriptionListing> =>
      (await this.http.request<{ subscription: SubscriptionListing }>('PATCH', `/webhooks/${seg(subscriptionId)}`, { ...options, body: input })).subscription,
    /**
     * Gives a subscription a new secret, shown only in this answer. Until `previousSecretExpiresAt`
     * the replaced secret keeps signing beside it (`webhook-signature` carries one signature per
     * secret; `X-Service-Signature` is made with the new one only), so verify with both meanwhile:
     * `verifyWebhook(body, headers, [oldSecret, newSecret])`. Scope write:webhooks.
     */
    rotateSecret: async (subscriptionId: string, input: RotateSecretOptions = {}, options: RequestOptions = {}): Promise<RotatedSecret> =>
      (
        await this.http.request<{ subscription: RotatedSecret }>('POST', `/webhooks/${seg(subscriptionId)}/rotate-secret`, {
          ...options,
          body: input.overlapSeconds === undefined ? {} : { overlapSeconds: input.overlapSeconds },
        })
      ).subscription,
    /**
     * After an outage: sends again, as new deliveries, every delivery of the subscription that
     * failed for good between `since` and `until` (default now), oldest first, once per event; an
     * event already pending or delivered again is skipped. At most 10,000 per call
     * (`recovery_too_large` otherwise: narrow the window). `dryRun` only counts. Scope write:webhooks.
     */
    recover: async (subscriptionId: string, input: RecoverOptions, options: RequestOptions = {}): Promise<WebhookRecovery> =>
      (
        await this.http.request<{ recovery: WebhookRecovery }>('POST', `/webhooks/${seg(subscriptionId)}/recover`, {
          ...options,
          body: { since: iso(input.since), until: iso(input.until), dryRun: input.dryRun },
        })
      ).recovery,
    /** Every subscription, newest first, auto-disabled ones included. Scope read:webhooks. */
    list: async (options: RequestOptions = {}): Promise<SubscriptionListing[]> =>
      (await this.http.request<{ subscriptions: SubscriptionListing[] }>('GET', '/webhooks', options)).subscriptions,
    /** Revokes a subscription and deletes its history. Scope write:webhooks. */
    delete: async (subscriptionId: string, options: RequestOptions = {}): Promise<{ deleted: true; id: string }> =>
      this.http.request<{ deleted: true; id: string }>('DELETE', `/webhooks/${seg(subscriptionId)}`, options),
  };

  readonly deliveries = {
    /** Every delivery of a subscription, newest first, across all pages. Scope read:webhooks. */
    list: (subscriptionId: string, query: DeliveryLogQuery = {}, options: RequestOptions = {}): AsyncGenerator<Delivery, void, undefined> =>
      walkPages((cursor) => this.deliveries.listPage(subscriptionId, { ...query, cursor }, options)),
    /** One page of the delivery log. Scope read:webhooks. */
    listPage: async (subscriptionId: string, query: DeliveryLogQuery & { cursor?: string } = {}, options: RequestOptions = {}): Promise<Page<Delivery>> => {
      const data = await this.http.request<{ deliveries: Delivery[]; nextCursor: string | null }>('GET', `/webhooks/${seg(subscriptionId)}/deliveries`, {
        ...options,
        query: { limit: query.limit, cursor: query.cursor, status: query.status },
      });
      return { items: data.deliveries, nextCursor: data.nextCursor };
    },
    /** One delivery with the payload as sent and each attempt's response excerpt. Scope read:webhooks. */
    get: async (subscriptionId: string, deliveryId: string, options: RequestOptions = {}): Promise<DeliveryDetail> =>
      (await this.http.request<{ delivery: DeliveryDetail }>('GET', `/webhooks/${seg(subscriptionId)}/deliveries/${seg(deliveryId)}`, options)).delivery,
    /**
     * Sends the same event again as a new delivery (new id, same body, 7 attempts of its own).
     * Retried safely, with one Idempotency-Key for all its tries. Scope write:webhooks.
     */
    redeliver: async (subscriptionId: string, deliveryId: string, options: RequestOptions = {}): Promise<Delivery> =>
      (
        await this.http.request<{ delivery: Delivery }>('POST', `/webhooks/${seg(subscriptionId)}/deliveries/${seg(deliveryId)}/redeliver`, options)
      ).delivery,
  };
}

/**
 * The example values the document shows, one account's story told consistently: the same site,
 * scan, subscription and delivery appear wherever an answer names them. Ids have the service's
 * form (`<kind>_` and 32 hex digits), timestamps are written as the service writes them (UTC,
 * milliseconds), and every example is checked against its schema (openapi-document.test).
 */

/** Where the service runs in the examples: the public origin the operator docs use. */
export const EXAMPLE_ORIGIN = 'https://visibility.example.com';

export const EXAMPLE_IDS = {
  site: 'site_81bb3141a48a45f9bae52b7cc1ff2781',
  scan: 'scan_e5ed533f8e4940d98daf2ace6d84ee56',
  olderScan: 'scan_3b0d6c2e91f84a7db1c55e0f2a9d8e41',
  run: 'run_4cf703d9d404475ab5dbfac55b465a5c',
  subscription: 'wh_acb680c9fc494dbca4088a510eafb3c3',
  newSubscription: 'wh_ce603ee3bf364b808dd08938402a76db',
  delivery: 'dlv_f9cb1860f51246f9867a05c64d120717',
  redelivery: 'dlv_05f6ae5cb7d1429f9c85fc82e5d0e700',
  aiDelivery: 'dlv_7d2e4f1a9c3b48e5a06f1b2c3d4e5f67',
  scanEvent: 'evt_ea28fdebc0c4454abd15ef5b87929ce9',
  aiEvent: 'evt_e17f8971081045f5a19cf1be42282092',
  powerUpEvent: 'evt_9c41d7e2a05b4f38b6e1d0c2f7a8b3e5',
  deployment: 'dep_5230c16bea964028a00e731f16bfca2e',
} as const;

export const EXAMPLE_DOMAIN = 'acme.example';
export const EXAMPLE_WEBHOOK_URL = 'https://hooks.acme.example/svc';

/** A secret as the service makes one (32 random bytes, hex) and its Standard Webhooks form. */
const SECRET = '0422d445013e5a563d1d933e0b58f102bd1bcc8f0e580026548ddc015e02310b';
const ROTATED_SECRET = '9f1b7c2ad4e85036b1c9e7a2f40d6b38c5e17a92d0f4b6c83e5a1d7f92b04c6e';
const standardWebhooksSecret = (secret: string) => `whsec_${Buffer.from(secret, 'utf8').toString('base64')}`;
const base64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');

export const EXAMPLE_SITE_SUMMARY = {
  id: EXAMPLE_IDS.site,
  domain: EXAMPLE_DOMAIN,
  name: 'Acme',
  status: 'active',
  createdAt: '2026-09-14T09:26:41.318Z',
};

const OTHER_SITE_SUMMARY = {
  id: 'site_5e0a9d37c2b14f6e8a1d4c7b90f3e2a6',
  domain: 'shop.acme.example',
  name: null,
  status: 'prospect',
  createdAt: '2026-10-30T15:02:17.904Z',
};

export const EXAMPLE_SITES = [EXAMPLE_SITE_SUMMARY, OTHER_SITE_SUMMARY];

export const EXAMPLE_SITE_DETAIL = {
  ...EXAMPLE_SITE_SUMMARY,
  latestScan: { id: EXAMPLE_IDS.scan, score: 87.5, status: 'completed', completedAt: '2026-11-23T06:03:47.592Z' },
};

export const EXAMPLE_HISTORY_SCANS = [
  { id: EXAMPLE_IDS.scan, score: 87.5, status: 'completed', trigger: 'scheduled', startedAt: '2026-11-23T06:00:02.114Z', completedAt: '2026-11-23T06:03:47.592Z' },
  { id: EXAMPLE_IDS.olderScan, score: 84.25, status: 'completed', trigger: 'manual', startedAt: '2026-11-19T14:31:09.407Z', completedAt: '2026-11-19T14:34:58.026Z' },
];

export const EXAMPLE_SCAN = {
  id: EXAMPLE_IDS.scan,
  siteId: EXAMPLE_IDS.site,
  status: 'completed',
  score: 87.5,
  trigger: 'scheduled',
  startedAt: '2026-11-23T06:00:02.114Z',
  completedAt: '2026-11-23T06:03:47.592Z',
  failedAt: null,
  categories: [
    { name: 'Performance', score: 91 },
    { name: 'AI visibility', score: 78 },
    { name: 'Structured data', score: 93.5 },
  ],
};

export const EXAMPLE_AI_MONITOR_RUN = {
  id: EXAMPLE_IDS.run,
  siteId: EXAMPLE_IDS.site,
  status: 'completed',
  compositeScore: 72.25,
  completedAt: '2026-11-23T07:15:09.880Z',
  engines: [
    { engine: 'chatgpt', score: 75 },
    { engine: 'perplexity', score: 69.5 },
  ],
};

export const EXAMPLE_SUBSCRIPTION = {
  id: EXAMPLE_IDS.subscription,
  url: EXAMPLE_WEBHOOK_URL,
  events: ['scan.completed', 'ai_check.completed'],
  createdAt: '2026-10-02T13:48:55.027Z',
  lastDeliveryAt: '2026-11-23T06:03:52.731Z',
  failureCount: 0,
  status: 'active',
};

const DISABLED_SUBSCRIPTION = {
  id: 'wh_2d9f64b0a1c84e37b5f0e6a9c3d2b1f8',
  url: 'https://old-hooks.acme.example/visibility',
  events: ['*'],
  createdAt: '2026-09-20T08:11:30.662Z',
  lastDeliveryAt: '2026-10-05T22:40:13.118Z',
  failureCount: 100,
  status: 'disabled',
};

export const EXAMPLE_SUBSCRIPTIONS = [EXAMPLE_SUBSCRIPTION, DISABLED_SUBSCRIPTION];

export const EXAMPLE_CREATE_WEBHOOK_REQUEST = { url: EXAMPLE_WEBHOOK_URL, events: ['scan.completed', 'ai_check.completed'] };

export const EXAMPLE_CREATED_SUBSCRIPTION = {
  id: EXAMPLE_IDS.newSubscription,
  url: EXAMPLE_WEBHOOK_URL,
  events: ['scan.completed', 'ai_check.completed'],
  secret: SECRET,
  standardWebhooksSecret: standardWebhooksSecret(SECRET),
  createdAt: '2026-11-24T10:12:05.446Z',
};

export const EXAMPLE_UPDATE_WEBHOOK_REQUEST = { url: 'https://hooks.acme.example/v2/svc', events: ['scan.completed', 'ai_check.completed', 'power_up.deployed'] };

export const EXAMPLE_UPDATED_SUBSCRIPTION = {
  ...EXAMPLE_SUBSCRIPTION,
  url: EXAMPLE_UPDATE_WEBHOOK_REQUEST.url,
  events: EXAMPLE_UPDATE_WEBHOOK_REQUEST.events,
};

export const EXAMPLE_ROTATE_REQUEST = { overlapSeconds: 3600 };

export const EXAMPLE_ROTATED_SECRET = {
  id: EXAMPLE_IDS.subscription,
  secret: ROTATED_SECRET,
  standardWebhooksSecret: standardWebhooksSecret(ROTATED_SECRET),
  previousSecretExpiresAt: '2026-11-24T11:20:44.091Z',
};

/** A window with both ends given, so the example answers the same whenever it is sent. */
export const EXAMPLE_RECOVER_REQUEST = { since: '2026-11-20T00:00:00Z', until: '2026-11-21T00:00:00Z', dryRun: true };

export const EXAMPLE_RECOVERY = { count: 12, since: '2026-11-20T00:00:00.000Z', until: '2026-11-21T00:00:00.000Z' };

export const EXAMPLE_SCAN_COMPLETED_EVENT = {
  event: 'scan.completed',
  timestamp: '2026-11-23T06:03:47.601Z',
  data: { scanId: EXAMPLE_IDS.scan, siteId: EXAMPLE_IDS.site, domain: EXAMPLE_DOMAIN, score: 87.5 },
};

export const EXAMPLE_AI_CHECK_COMPLETED_EVENT = {
  event: 'ai_check.completed',
  timestamp: '2026-11-23T07:15:09.893Z',
  data: { runId: EXAMPLE_IDS.run, siteId: EXAMPLE_IDS.site, domain: EXAMPLE_DOMAIN, compositeScore: 72.25 },
};

export const EXAMPLE_POWER_UP_DEPLOYED_EVENT = {
  event: 'power_up.deployed',
  timestamp: '2026-11-23T09:42:31.257Z',
  data: { deploymentId: EXAMPLE_IDS.deployment, siteId: EXAMPLE_IDS.site, powerUpId: 'pu_schema_markup' },
};

const UNAVAILABLE = 'upstream connect error or disconnect/reset before headers';
const ACCEPTED = '{"received":true}';

/** The scan.completed delivery: the receiver answered 503 once, then 200. */
export const EXAMPLE_DELIVERY_DETAIL = {
  id: EXAMPLE_IDS.delivery,
  eventId: EXAMPLE_IDS.scanEvent,
  event: 'scan.completed',
  status: 'delivered',
  createdAt: '2026-11-23T06:03:47.601Z',
  nextAttemptAt: null,
  redeliveryOf: null,
  payload: EXAMPLE_SCAN_COMPLETED_EVENT,
  attempts: [
    { n: 1, at: '2026-11-23T06:03:47.655Z', statusCode: 503, error: 'HTTP 503', durationMs: 184, responseExcerpt: UNAVAILABLE, responseExcerptBase64: base64(UNAVAILABLE) },
    { n: 2, at: '2026-11-23T06:03:52.702Z', statusCode: 200, error: null, durationMs: 29, responseExcerpt: ACCEPTED, responseExcerptBase64: base64(ACCEPTED) },
  ],
};

const withoutExcerpts = ({ responseExcerpt: _text, responseExcerptBase64: _bytes, ...attempt }: (typeof EXAMPLE_DELIVERY_DETAIL.attempts)[number]) => attempt;

export const EXAMPLE_DELIVERY = (({ payload: _payload, ...delivery }) => ({ ...delivery, attempts: delivery.attempts.map(withoutExcerpts) }))(EXAMPLE_DELIVERY_DETAIL);

/** A page of the log: the ai_check.completed delivery still retrying after a timeout, then the one above. */
export const EXAMPLE_DELIVERIES = [
  {
    id: EXAMPLE_IDS.aiDelivery,
    eventId: EXAMPLE_IDS.aiEvent,
    event: 'ai_check.completed',
    status: 'pending',
    createdAt: '2026-11-23T07:15:09.893Z',
    nextAttemptAt: '2026-11-23T07:15:40.012Z',
    redeliveryOf: null,
    attempts: [{ n: 1, at: '2026-11-23T07:15:09.941Z', statusCode: null, error: 'timeout', durationMs: 10003 }],
  },
  EXAMPLE_DELIVERY,
];

export const EXAMPLE_REDELIVERY = {
  id: EXAMPLE_IDS.redelivery,
  eventId: EXAMPLE_IDS.scanEvent,
  event: 'scan.completed',
  status: 'pending',
  createdAt: '2026-11-24T10:30:12.378Z',
  nextAttemptAt: '2026-11-24T10:30:12.378Z',
  redeliveryOf: EXAMPLE_IDS.delivery,
  attempts: [],
};

/** A `nextCursor` as the service makes it for a page ending at this time and id (opaque to clients). */
const cursorAfter = (at: string, id: string) => Buffer.from(JSON.stringify([at, id]), 'utf8').toString('base64url');

/** The history page above continues after its last scan. */
export const EXAMPLE_HISTORY_NEXT_CURSOR = cursorAfter(EXAMPLE_HISTORY_SCANS[1]!.completedAt, EXAMPLE_HISTORY_SCANS[1]!.id);
/** The log page above continues after its last delivery. */
export const EXAMPLE_DELIVERIES_NEXT_CURSOR = cursorAfter(EXAMPLE_DELIVERY.createdAt, EXAMPLE_DELIVERY.id);

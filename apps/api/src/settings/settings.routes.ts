import express, { Router, type ErrorRequestHandler, type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import {
  ConflictError,
  CsrfError,
  DomainError,
  endSettingsSession,
  exchangeSettingsLink,
  findSettingsSession,
  forAccount,
  inspectSettingsLink,
  InputError,
  isSettingsCsrfToken,
  NotFoundError,
  SETTINGS_SESSION_LIFETIME_MS,
  SettingsSessionError,
  settingsCsrfToken,
  useSettingsFormToken,
  ValidationError,
  type AccountRepositories,
  type Db,
  type Logger,
  type Queues,
  type RedisClient,
  type SecretBox,
} from '@svc/core';
import { decodeDeliveryCursor, encodeDeliveryCursor } from '../deliveries/delivery-cursor.js';
import { ID_SHAPE } from '../http/path-params.js';
import { parseCreateSubscription } from '../webhooks/webhooks.routes.js';
import type { SafeHtml } from './html.js';
import { SETTINGS_CSS, SETTINGS_JS } from './settings-assets.js';
import {
  apiKeysPage,
  continueSignInPage,
  deleteWebhookPage,
  deliveryLogPage,
  messagePage,
  revokeKeyPage,
  signedInPage,
  webhooksPage,
  type KeyForm,
  type ListedSubscription,
  type PageSession,
  type WebhookForm,
} from './settings-pages.js';

export interface SettingsDeps {
  db: Db;
  /** Where a key's revocation is announced, as `svc keys revoke` does. */
  redis: RedisClient;
  queues: Pick<Queues, 'deliveries'>;
  logger: Pick<Logger, 'warn'>;
  /** Seals a new webhook secret as the API's other writes do. */
  secrets: SecretBox;
  /** QUEUE_PREFIX: the revocation marker's namespace. */
  queuePrefix: string;
  /** PUBLIC_BASE_URL: an https origin makes the session cookie Secure. */
  publicBaseUrl: string;
}

/** The session cookie: only ever sent to /settings, never to /api/v1. */
const COOKIE = 'svc_settings';
const COOKIE_PATH = '/settings';
/** Deliveries per page of the log; each is shown with every attempt. */
const LOG_PAGE_SIZE = 10;

/**
 * Pages load only this origin's files, post forms only here, and are never framed, cached or
 * followed by a Referer (a sign-in URL holds its token).
 */
const SECURITY_HEADERS = {
  'Content-Security-Policy': [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; '),
  'Cache-Control': 'no-store',
  'Referrer-Policy': 'no-referrer',
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
} as const;

/** The signed-in request's account and session. */
interface SettingsSession extends PageSession {
  accountId: string;
  token: string;
}

const sessionOf = (res: Response): SettingsSession => res.locals.settings as SettingsSession;
const accountOf = (res: Response, db: Db): AccountRepositories => forAccount(db, sessionOf(res).accountId);
const send = (res: Response, page: SafeHtml, status = 200) => res.status(status).type('html').send(page.text);
/** Form fields the browser sends once or many times: always a list of strings. */
const listOf = (value: unknown): string[] => (Array.isArray(value) ? value : value === undefined ? [] : [value]).filter((v): v is string => typeof v === 'string');
const textOf = (value: unknown): string => (typeof value === 'string' ? value : '');
/** "grant at least one scope" → "Grant at least one scope." */
const sentence = (message: string) => `${message.charAt(0).toUpperCase()}${message.slice(1)}${/[.!?]$/.test(message) ? '' : '.'}`;

function readCookie(req: Request, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return undefined;
}

/** True for an Origin header naming this service: PUBLIC_BASE_URL, or the host the request was sent to. */
function isOwnOrigin(origin: string, host: string | undefined, publicBaseUrl: string): boolean {
  if (origin === publicBaseUrl) return true;
  try {
    return host !== undefined && new URL(origin).host === host;
  } catch {
    return false;
  }
}

function sessionCookie(value: string, maxAgeSeconds: number, secure: boolean): string {
  return [`${COOKIE}=${value}`, `Path=${COOKIE_PATH}`, `Max-Age=${maxAgeSeconds}`, 'HttpOnly', 'SameSite=Strict', ...(secure ? ['Secure'] : [])].join('; ');
}

const NO_KEY = 'No API key with this id exists in your account.';
const NO_WEBHOOK = 'No webhook with this id exists in your account.';

function requireId(param: string, message: string): RequestHandler {
  return (req, _res, next) => {
    if (!ID_SHAPE.test(String(req.params[param]))) throw new NotFoundError(message);
    next();
  };
}

async function findSubscription(repos: AccountRepositories, id: string): Promise<ListedSubscription> {
  const listed = JSON.parse(await repos.webhooks.listJson()) as ListedSubscription[];
  const found = listed.find((sub) => sub.id === id);
  if (!found) throw new NotFoundError(NO_WEBHOOK);
  return found;
}

/**
 * The account owner's Settings (spec §5.3–5.5): API keys and webhooks, in server-rendered pages.
 * A single-use link opens a session for one account (a cookie scoped to /settings); every change
 * is a POST carrying the session's CSRF token, and goes through the same core functions as the
 * API and `svc`.
 */
export function settingsRoutes(deps: SettingsDeps): Router {
  const router = Router();
  const secure = deps.publicBaseUrl.startsWith('https:');
  const form = express.urlencoded({ extended: false, limit: '16kb', parameterLimit: 50 });

  /** The request's live session, if its cookie names one. */
  const liveSession = async (req: Request): Promise<SettingsSession | undefined> => {
    const token = readCookie(req, COOKIE);
    const found = token === undefined ? undefined : await findSettingsSession(deps.db, token);
    if (!found || token === undefined) return undefined;
    return { accountId: found.accountId, accountName: found.accountName, token, csrf: settingsCsrfToken(token) };
  };
  /** As liveSession, noted for the page and its forms. */
  const findSession = async (req: Request, res: Response): Promise<SettingsSession | undefined> => {
    const session = await liveSession(req);
    if (session) res.locals.settings = session;
    return session;
  };
  /** Uses the link: a new session for its account, the browser's previous one ended. */
  const signIn = async (req: Request, res: Response, token: string): Promise<void> => {
    const previous = readCookie(req, COOKIE);
    const { sessionToken } = await exchangeSettingsLink(deps.db, token);
    if (previous !== undefined) await endSettingsSession(deps.db, previous);
    res.set('Set-Cookie', sessionCookie(sessionToken, SETTINGS_SESSION_LIFETIME_MS / 1000, secure));
  };
  const requireSession: RequestHandler = async (req, res, next) => {
    if (!(await findSession(req, res))) throw new SettingsSessionError('Your Settings session has ended. Open Settings again from your account to sign in.');
    next();
  };
  const requireCsrf: RequestHandler = (req, res, next) => {
    if (!isSettingsCsrfToken(sessionOf(res).token, (req.body as Record<string, unknown> | undefined)?._csrf)) {
      throw new CsrfError('This form has expired or did not come from Settings, so nothing was changed. Reload the page and try again.');
    }
    next();
  };
  /** A change: its form is read, then refused unless it carries the session's CSRF token. */
  const change = [form, requireSession, requireCsrf];
  /** The API keys page of the request's account, with what this answer adds to it. */
  const sendKeysPage = async (res: Response, extra: Omit<Parameters<typeof apiKeysPage>[0], 'session' | 'keys'> = {}, status = 200) => {
    send(res, apiKeysPage({ session: sessionOf(res), keys: await accountOf(res, deps.db).keys.list(), ...extra }), status);
  };
  /** The Webhooks page of the request's account, with what this answer adds to it. */
  const sendWebhooksPage = async (res: Response, extra: Omit<Parameters<typeof webhooksPage>[0], 'session' | 'subscriptions'> = {}, status = 200) => {
    const subscriptions = JSON.parse(await accountOf(res, deps.db).webhooks.listJson()) as ListedSubscription[];
    send(res, webhooksPage({ session: sessionOf(res), subscriptions, ...extra }), status);
  };

  /** A create form is sent once: the same form again (a reload, Back then Forward) creates nothing. */
  const once: RequestHandler = async (req, res, next) => {
    if (!(await useSettingsFormToken(deps.db, sessionOf(res).token, (req.body as Record<string, unknown>)._form))) {
      throw new ConflictError('This form was already sent, so nothing new was created. What it created is listed below; a key or secret is shown only once.');
    }
    next();
  };

  router.use('/settings', (_req, res, next) => {
    res.set(SECURITY_HEADERS);
    next();
  });
  router.get('/settings/assets/settings.css', (_req, res) => {
    res.type('text/css').send(SETTINGS_CSS);
  });
  router.get('/settings/assets/settings.js', (_req, res) => {
    res.type('application/javascript').send(SETTINGS_JS);
  });

  // Opening the link in a browser uses it at once, unless this browser is signed in to another
  // account's Settings (then it asks first: a link of someone else's account must not switch an
  // owner's Settings behind their back). Anything but a browser following a link (Sec-Fetch-Mode
  // navigate, Sec-Fetch-Dest document) — a link preview, a mail scanner, a HEAD — gets the page
  // that asks, and the link stays unused.
  router.get('/settings/sign-in', async (req, res) => {
    const token = textOf(req.query.token);
    const link = await inspectSettingsLink(deps.db, token);
    const current = await liveSession(req);
    const followed = req.method === 'GET' && req.get('sec-fetch-mode') === 'navigate' && req.get('sec-fetch-dest') === 'document';
    if (!followed || (current && current.accountId !== link.accountId)) {
      send(res, continueSignInPage({ token, accountName: link.accountName, ...(current && current.accountId !== link.accountId ? { signedInTo: current.accountName } : {}) }));
      return;
    }
    await signIn(req, res, token);
    // A page of this origin moves on to Settings: a redirect would still be the navigation that
    // came from the main product's site, for which the browser withholds a SameSite=Strict cookie.
    send(res, signedInPage());
  });
  // "Continue to Settings" on that page: only from a page of this origin (a form another site
  // posts would sign its visitor in to the account of its choice).
  router.post('/settings/sign-in', form, async (req, res) => {
    const site = req.get('sec-fetch-site');
    const origin = req.get('origin');
    if ((site !== undefined && site !== 'same-origin') || (origin !== undefined && !isOwnOrigin(origin, req.get('host'), deps.publicBaseUrl))) {
      throw new CsrfError('This sign-in did not come from Settings, so nothing was changed. Open the link again.');
    }
    await signIn(req, res, textOf((req.body as Record<string, unknown>).token));
    res.redirect(303, '/settings/api-keys');
  });
  router.get('/settings', (_req, res) => {
    res.redirect(303, '/settings/api-keys');
  });

  router.get('/settings/api-keys', requireSession, async (req, res) => {
    await sendKeysPage(res, req.query.notice === 'revoked' ? { notice: 'The key was revoked. The API refuses it from now on.' } : {});
  });
  router.post(
    '/settings/api-keys',
    ...change,
    once,
    async (req: Request, res: Response) => {
      const body = req.body as Record<string, unknown>;
      const created = await accountOf(res, deps.db).keys.create({ name: textOf(body.name), scopes: listOf(body.scopes) });
      await sendKeysPage(res, { created: { key: created.key, name: created.name } }, 201);
    },
    formErrors(async (error, req, res) => {
      if (error instanceof ConflictError) return sendKeysPage(res, { notice: error.message }, 409).then(() => true);
      if (!(error instanceof InputError) || (error.field !== 'name' && error.field !== 'scopes')) return false;
      const body = req.body as Record<string, unknown>;
      const keyForm: KeyForm = { name: textOf(body.name), scopes: listOf(body.scopes), errors: { [error.field]: sentence(error.message) } };
      return sendKeysPage(res, { form: keyForm }, 400).then(() => true);
    }),
  );
  router.get('/settings/api-keys/:keyId/revoke', requireSession, requireId('keyId', NO_KEY), async (req, res) => {
    const key = (await accountOf(res, deps.db).keys.list()).find((k) => k.id === req.params.keyId);
    if (!key) throw new NotFoundError(NO_KEY);
    if (key.revokedAt) return res.redirect(303, '/settings/api-keys');
    send(res, revokeKeyPage({ session: sessionOf(res), key }));
  });
  router.post('/settings/api-keys/:keyId/revoke', ...change, requireId('keyId', NO_KEY), async (req, res) => {
    await accountOf(res, deps.db).keys.revoke(String(req.params.keyId), { redis: deps.redis, prefix: deps.queuePrefix });
    res.redirect(303, '/settings/api-keys?notice=revoked');
  });

  router.get('/settings/webhooks', requireSession, async (req, res) => {
    await sendWebhooksPage(res, req.query.notice === 'deleted' ? { notice: 'The webhook was deleted.' } : {});
  });
  router.post(
    '/settings/webhooks',
    ...change,
    once,
    async (req: Request, res: Response) => {
      const body = req.body as Record<string, unknown>;
      const sub = await accountOf(res, deps.db).webhooks.create(parseCreateSubscription({ url: textOf(body.url), events: listOf(body.events) }), deps.secrets);
      await sendWebhooksPage(res, { created: { url: sub.url, secret: sub.secret } }, 201);
    },
    formErrors(async (error, req, res) => {
      if (error instanceof ConflictError) return sendWebhooksPage(res, { notice: error.message }, 409).then(() => true);
      if (!(error instanceof ValidationError)) return false;
      const body = req.body as Record<string, unknown>;
      const field = error.code === 'invalid_url' ? 'url' : error.code === 'invalid_events' ? 'events' : 'form';
      const webhookForm: WebhookForm = { url: textOf(body.url), events: listOf(body.events), errors: { [field]: error.message } };
      return sendWebhooksPage(res, { form: webhookForm }, 400).then(() => true);
    }),
  );
  router.get('/settings/webhooks/:subscriptionId', requireSession, requireId('subscriptionId', NO_WEBHOOK), async (req, res) => {
    const repos = accountOf(res, deps.db);
    const subscription = await findSubscription(repos, String(req.params.subscriptionId));
    const cursor = typeof req.query.cursor === 'string' ? req.query.cursor : undefined;
    const page = await repos.deliveries.list(subscription.id, { limit: LOG_PAGE_SIZE, after: cursor === undefined ? undefined : decodeDeliveryCursor(cursor) });
    // Each delivery with every attempt's response excerpt: one read per delivery of the page, in turn.
    const deliveries = [];
    for (const delivery of page.deliveries) deliveries.push(await repos.deliveries.get(subscription.id, delivery.id));
    const notice = req.query.notice === 'redelivered' ? 'The delivery was queued again as a new delivery.' : undefined;
    send(
      res,
      deliveryLogPage({
        session: sessionOf(res),
        subscription,
        deliveries,
        nextCursor: page.next ? encodeDeliveryCursor(page.next) : null,
        firstPage: cursor === undefined,
        ...(notice ? { notice } : {}),
      }),
    );
  });
  router.post(
    '/settings/webhooks/:subscriptionId/deliveries/:deliveryId/redeliver',
    ...change,
    requireId('subscriptionId', NO_WEBHOOK),
    requireId('deliveryId', 'No delivery with this id exists for this webhook.'),
    async (req, res) => {
      const subscriptionId = String(req.params.subscriptionId);
      await accountOf(res, deps.db).deliveries.redeliver(subscriptionId, String(req.params.deliveryId), { queues: deps.queues, logger: deps.logger });
      res.redirect(303, `/settings/webhooks/${subscriptionId}?notice=redelivered`);
    },
  );
  router.get('/settings/webhooks/:subscriptionId/delete', requireSession, requireId('subscriptionId', NO_WEBHOOK), async (req, res) => {
    const subscription = await findSubscription(accountOf(res, deps.db), String(req.params.subscriptionId));
    send(res, deleteWebhookPage({ session: sessionOf(res), subscription }));
  });
  router.post('/settings/webhooks/:subscriptionId/delete', ...change, requireId('subscriptionId', NO_WEBHOOK), async (req, res) => {
    await accountOf(res, deps.db).webhooks.revoke(String(req.params.subscriptionId), { queues: deps.queues });
    res.redirect(303, '/settings/webhooks?notice=deleted');
  });

  router.post('/settings/sign-out', ...change, async (_req, res) => {
    await endSettingsSession(deps.db, sessionOf(res).token);
    res.set('Set-Cookie', sessionCookie('', 0, secure));
    send(res, messagePage({ title: 'Signed out', message: 'You are signed out of Settings. Open Settings again from your account to sign in.' }));
  });

  // Signed in or not, an unknown page is the 404 page; signed in, with the way back.
  router.use('/settings', async (req, res) => {
    await findSession(req, res);
    throw new NotFoundError('There is no such page in Settings.');
  });
  router.use('/settings', settingsErrorPage());
  return router;
}

/**
 * A form's own error handler, placed after its handler: a refusal of what was typed comes back
 * as the form, with the message beside its field. Anything else goes on to the error page.
 */
function formErrors(render: (error: unknown, req: Request, res: Response) => Promise<boolean>): ErrorRequestHandler {
  return (error: unknown, req: Request, res: Response, next: NextFunction) => {
    render(error, req, res).then(
      (handled) => (handled ? undefined : next(error)),
      (renderError: unknown) => next(renderError),
    );
  };
}

/** The form parser's refusals (too large, too many fields, a charset it cannot read) carry a 4xx status and a type. */
function fromFormParser(error: unknown): DomainError | undefined {
  const { type, status } = error as { type?: unknown; status?: unknown };
  if (typeof type !== 'string' || typeof status !== 'number' || status < 400 || status > 499) return undefined;
  return new InputError('The form could not be read: it is too large or not a form. Reload the page and try again.');
}

const TITLES: Record<number, string> = {
  400: 'That cannot be done',
  401: 'Sign in again',
  403: 'Nothing was changed',
  404: 'Not found',
  409: 'That cannot be done now',
  410: 'This link can no longer be used',
  413: 'Too much to send',
};

/** Settings' error page: a typed error at its type's status, anything else a bare 500. */
function settingsErrorPage(): ErrorRequestHandler {
  return (error: unknown, req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(error);
    const handled =
      error instanceof DomainError
        ? error
        : error instanceof URIError
          ? new NotFoundError('There is no such page in Settings.')
          : fromFormParser(error);
    if (!handled) return next(error);
    const session = res.locals.settings as SettingsSession | undefined;
    const signedOut = handled.status === 401 || handled.status === 410;
    const back = req.path.startsWith('/settings/webhooks') ? { href: '/settings/webhooks', label: 'Back to webhooks' } : { href: '/settings/api-keys', label: 'Back to API keys' };
    send(
      res,
      messagePage({
        title: TITLES[handled.status] ?? 'That cannot be done',
        message: handled.message,
        ...(session && !signedOut ? { session, next: back } : {}),
      }),
      handled.status,
    );
  };
}

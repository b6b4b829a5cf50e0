import { EVENT_TYPES, newSettingsFormToken, SCOPES, WILDCARD_EVENT, type ApiKeyListing, type DeliveryDetail } from '@svc/core';
import { html, type SafeHtml } from './html.js';

/** What every signed-in page needs: the session's CSRF token for its forms, and whose Settings these are. */
export interface PageSession {
  csrf: string;
  accountName: string;
}

type Section = 'api-keys' | 'webhooks';

const when = (date: Date | string | null): SafeHtml | string => {
  if (date === null) return 'Never';
  const at = typeof date === 'string' ? new Date(date) : date;
  const text = `${at.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
  return html`<time datetime="${at.toISOString()}">${text}</time>`;
};

const csrfField = (session: PageSession) => html`<input type="hidden" name="_csrf" value="${session.csrf}">`;
/** A create form's single-use token: sent again (a reload, Back then Forward), the form creates nothing. */
const onceField = () => html`<input type="hidden" name="_form" value="${newSettingsFormToken()}">`;
/** A page whose form came back with an error says so first in its title. */
const titleOf = (title: string, errors: object) => (Object.values(errors).some(Boolean) ? `Error: ${title}` : title);
/** The first field in error takes the focus, so a keyboard or screen-reader user lands on it. */
const focusIf = (first: boolean) => (first ? html` autofocus` : '');

/** The frame of every page: one h1, the section links and "Sign out" when signed in. */
export function layout(input: { title: string; session?: PageSession; section?: Section; body: SafeHtml }): SafeHtml {
  const current = (section: Section) => (input.section === section ? html` aria-current="page"` : '');
  const header = input.session
    ? html`<header class="bar">
    <a class="skip" href="#main">Skip to content</a>
    <nav aria-label="Settings">
      <a href="/settings/api-keys"${current('api-keys')}>API keys</a>
      <a href="/settings/webhooks"${current('webhooks')}>Webhooks</a>
    </nav>
    <p class="account">Account: <strong>${input.session.accountName}</strong></p>
    <form method="post" action="/settings/sign-out">${csrfField(input.session)}<button type="submit" class="secondary">Sign out</button></form>
  </header>`
    : html`<header class="bar"><span class="brand">Site Visibility Settings</span></header>`;
  return html`<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>${input.title} · Site Visibility Settings</title>
  <link rel="stylesheet" href="/settings/assets/settings.css">
  <script src="/settings/assets/settings.js" defer></script>
</head>
<body>
  ${header}
  <main id="main">
${input.body}
  </main>
</body>
</html>
`;
}

/** A page that explains a refusal or an error, with where to go next. */
export function messagePage(input: { title: string; message: string; session?: PageSession; next?: { href: string; label: string } }): SafeHtml {
  return layout({
    title: input.title,
    ...(input.session ? { session: input.session } : {}),
    body: html`<h1>${input.title}</h1>
    <p>${input.message}</p>
    ${input.next ? html`<p><a href="${input.next.href}">${input.next.label}</a></p>` : ''}`,
  });
}

/**
 * The page a sign-in link answers when it is not used at once: opened by something that is not a
 * browser following it (a link preview, a mail scanner), or while this browser is signed in to
 * another account's Settings. The link is used only when the owner continues.
 */
export function continueSignInPage(input: { token: string; accountName: string; signedInTo?: string }): SafeHtml {
  return layout({
    title: 'Open Settings',
    body: html`<h1>Open Settings</h1>
    <p>This link opens the Settings of <strong>${input.accountName}</strong>.</p>
    ${input.signedInTo ? html`<p>This browser is signed in to the Settings of <strong>${input.signedInTo}</strong>; continuing signs it out of them.</p>` : ''}
    <form method="post" action="/settings/sign-in">
      <input type="hidden" name="token" value="${input.token}">
      <button type="submit">Continue to Settings</button>
    </form>`,
  });
}

/** The page the sign-in link answers: the session cookie is set, and the page moves on to Settings from this origin. */
export function signedInPage(): SafeHtml {
  return html`<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <meta http-equiv="refresh" content="0;url=/settings/api-keys">
  <title>Signed in · Site Visibility Settings</title>
  <link rel="stylesheet" href="/settings/assets/settings.css">
</head>
<body>
  <main id="main">
    <h1>Signed in</h1>
    <p><a href="/settings/api-keys">Continue to Settings</a></p>
  </main>
</body>
</html>
`;
}

function fieldError(id: string, message: string | undefined): SafeHtml | string {
  return message ? html`<p class="error" id="${id}">${message}</p>` : '';
}

const describedBy = (id: string, message: string | undefined) => (message ? html` aria-describedby="${id}" aria-invalid="true"` : '');

/** A secret shown this once, with a copy button (settings.js) and the advice to store it now. */
function shownOnce(input: { heading: string; id: string; value: string; advice: string }): SafeHtml {
  return html`<section class="once" aria-labelledby="${input.id}-heading">
      <h2 id="${input.id}-heading">${input.heading}</h2>
      <p>${input.advice}</p>
      <p class="secret"><code id="${input.id}">${input.value}</code>
        <button type="button" data-copy="${input.id}" hidden>Copy</button>
        <span role="status" class="copy-status" data-copy-status="${input.id}"></span></p>
    </section>`;
}

export interface KeyForm {
  name?: string;
  scopes?: readonly string[];
  errors?: { name?: string; scopes?: string };
}

/** Settings → API keys (spec §5.3–5.5). */
export function apiKeysPage(input: {
  session: PageSession;
  keys: readonly ApiKeyListing[];
  form?: KeyForm;
  created?: { key: string; name: string };
  notice?: string;
}): SafeHtml {
  const form = input.form ?? {};
  const errors = form.errors ?? {};
  const checked = new Set(form.scopes ?? []);
  const rows = input.keys.map(
    (key) => html`<tr>
          <th scope="row">${key.name}</th>
          <td><code>${key.prefix}…</code></td>
          <td>${key.scopes.join(', ')}</td>
          <td>${when(key.createdAt)}</td>
          <td>${when(key.lastUsedAt)}</td>
          <td>${key.revokedAt ? html`Revoked ${when(key.revokedAt)}` : 'Active'}</td>
          <td>${key.revokedAt ? '' : html`<form method="get" action="/settings/api-keys/${key.id}/revoke"><button type="submit" class="danger">Revoke</button></form>`}</td>
        </tr>`,
  );
  return layout({
    title: titleOf('API keys', errors),
    session: input.session,
    section: 'api-keys',
    body: html`<h1>API keys</h1>
    <p>Your servers call the API with these keys. Each key has only the scopes you grant it. Settings shows a key in full once, when it is created; if a key is lost, revoke it and create another.</p>
    ${input.notice ? html`<p class="notice" role="status">${input.notice}</p>` : ''}
    ${input.created ? shownOnce({ heading: `Your new key “${input.created.name}”`, id: 'new-key', value: input.created.key, advice: 'Copy it now and store it safely: it is not shown again.' }) : ''}
    <section aria-labelledby="create-key-heading">
      <h2 id="create-key-heading">Create a key</h2>
      <form method="post" action="/settings/api-keys" novalidate>
        ${csrfField(input.session)}${onceField()}
        <div class="field">
          <label for="key-name">Name</label>
          <input id="key-name" name="name" type="text" autocomplete="off" value="${form.name ?? ''}"${describedBy('key-name-error', errors.name)}${focusIf(Boolean(errors.name))}>
          ${fieldError('key-name-error', errors.name)}
        </div>
        <fieldset${describedBy('scopes-error', errors.scopes)}>
          <legend>Scopes</legend>
          ${SCOPES.map((scope, i) => html`<label class="check"><input type="checkbox" name="scopes" value="${scope}"${checked.has(scope) ? html` checked` : ''}${focusIf(i === 0 && !errors.name && Boolean(errors.scopes))}> ${scope}</label>`)}
          ${fieldError('scopes-error', errors.scopes)}
        </fieldset>
        <button type="submit">Create key</button>
      </form>
    </section>
    <section aria-labelledby="keys-heading">
      <h2 id="keys-heading">Your keys</h2>
      ${
        input.keys.length === 0
          ? html`<p>No keys yet.</p>`
          : html`<div class="table-wrap" role="region" aria-label="Table of your keys" tabindex="0">
      <table>
        <thead><tr><th scope="col">Name</th><th scope="col">Key</th><th scope="col">Scopes</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">State</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
        <tbody>${rows}</tbody>
      </table>
      </div>`
      }
    </section>`,
  });
}

/** The confirmation step of a key's revocation. */
export function revokeKeyPage(input: { session: PageSession; key: ApiKeyListing }): SafeHtml {
  return layout({
    title: 'Revoke key',
    session: input.session,
    section: 'api-keys',
    body: html`<h1>Revoke key “${input.key.name}”?</h1>
    <p>The key <code>${input.key.prefix}…</code> stops working at once: the API answers <code>invalid_key</code> to every request that presents it. This cannot be undone.</p>
    <form method="post" action="/settings/api-keys/${input.key.id}/revoke" class="actions">
      ${csrfField(input.session)}
      <button type="submit" class="danger">Revoke</button>
      <a href="/settings/api-keys">Cancel</a>
    </form>`,
  });
}

/** A subscription as the webhooks list gives it (the API's list form). */
export interface ListedSubscription {
  id: string;
  url: string;
  events: string[];
  createdAt: string;
  lastDeliveryAt: string | null;
  failureCount: number;
  status: 'active' | 'disabled';
}

export interface WebhookForm {
  url?: string;
  events?: readonly string[];
  errors?: { url?: string; events?: string; form?: string };
}

const eventsText = (events: readonly string[]) => (events.includes(WILDCARD_EVENT) ? 'All events' : events.join(', '));

/** Settings → Webhooks. */
export function webhooksPage(input: {
  session: PageSession;
  subscriptions: readonly ListedSubscription[];
  form?: WebhookForm;
  created?: { url: string; secret: string };
  notice?: string;
}): SafeHtml {
  const form = input.form ?? {};
  const errors = form.errors ?? {};
  const checked = new Set(form.events ?? []);
  const rows = input.subscriptions.map(
    (sub) => html`<tr>
          <th scope="row"><a href="/settings/webhooks/${sub.id}">${sub.url}</a></th>
          <td>${eventsText(sub.events)}</td>
          <td>${when(sub.lastDeliveryAt)}</td>
          <td>${sub.failureCount}</td>
          <td>${sub.status === 'active' ? 'Active' : 'Disabled'}</td>
          <td><form method="get" action="/settings/webhooks/${sub.id}/delete"><button type="submit" class="danger">Delete</button></form></td>
        </tr>`,
  );
  return layout({
    title: titleOf('Webhooks', errors),
    session: input.session,
    section: 'webhooks',
    body: html`<h1>Webhooks</h1>
    <p>The service posts signed events to these URLs. Open one to see its delivery log.</p>
    ${input.notice ? html`<p class="notice" role="status">${input.notice}</p>` : ''}
    ${input.created ? shownOnce({ heading: 'Your webhook’s signing secret', id: 'new-secret', value: input.created.secret, advice: `Deliveries to ${input.created.url} are signed with this secret. Copy it now: it is not shown again.` }) : ''}
    <section aria-labelledby="create-webhook-heading">
      <h2 id="create-webhook-heading">Create a webhook</h2>
      <form method="post" action="/settings/webhooks" novalidate>
        ${csrfField(input.session)}${onceField()}
        ${errors.form ? html`<p class="error" role="alert">${errors.form}</p>` : ''}
        <div class="field">
          <label for="webhook-url">URL</label>
          <input id="webhook-url" name="url" type="url" inputmode="url" autocomplete="off" placeholder="https://" value="${form.url ?? ''}"${describedBy('webhook-url-error', errors.url)}${focusIf(Boolean(errors.url))}>
          ${fieldError('webhook-url-error', errors.url)}
        </div>
        <fieldset${describedBy('events-error', errors.events)}>
          <legend>Events</legend>
          <label class="check"><input type="checkbox" name="events" value="${WILDCARD_EVENT}"${checked.has(WILDCARD_EVENT) ? html` checked` : ''}${focusIf(!errors.url && Boolean(errors.events))}> All events</label>
          ${EVENT_TYPES.map((type) => html`<label class="check"><input type="checkbox" name="events" value="${type}"${checked.has(type) ? html` checked` : ''}> ${type}</label>`)}
          ${fieldError('events-error', errors.events)}
        </fieldset>
        <button type="submit">Create webhook</button>
      </form>
    </section>
    <section aria-labelledby="webhooks-heading">
      <h2 id="webhooks-heading">Your webhooks</h2>
      ${
        input.subscriptions.length === 0
          ? html`<p>No webhooks yet.</p>`
          : html`<div class="table-wrap" role="region" aria-label="Table of your webhooks" tabindex="0">
      <table>
        <thead><tr><th scope="col">URL</th><th scope="col">Events</th><th scope="col">Last delivered</th><th scope="col">Failures</th><th scope="col">State</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
        <tbody>${rows}</tbody>
      </table>
      </div>`
      }
    </section>`,
  });
}

/** The confirmation step of a subscription's deletion. */
export function deleteWebhookPage(input: { session: PageSession; subscription: ListedSubscription }): SafeHtml {
  return layout({
    title: 'Delete webhook',
    session: input.session,
    section: 'webhooks',
    body: html`<h1>Delete the webhook to ${input.subscription.url}?</h1>
    <p>No event is sent to it from now on, and its delivery log is deleted with it. This cannot be undone.</p>
    <form method="post" action="/settings/webhooks/${input.subscription.id}/delete" class="actions">
      ${csrfField(input.session)}
      <button type="submit" class="danger">Delete</button>
      <a href="/settings/webhooks">Cancel</a>
    </form>`,
  });
}

function attemptResult(attempt: DeliveryDetail['attempts'][number]): string {
  if (attempt.statusCode !== null) return `HTTP ${attempt.statusCode}`;
  return attempt.error ?? 'No answer';
}

function deliveryArticle(session: PageSession, subscriptionId: string, delivery: DeliveryDetail): SafeHtml {
  const headingId = `delivery-${delivery.id}`;
  const attempts = delivery.attempts.map(
    (attempt) => html`<tr>
            <th scope="row">${attempt.n}</th>
            <td>${when(attempt.at)}</td>
            <td>${attemptResult(attempt)}</td>
            <td>${attempt.durationMs} ms</td>
            <td>${attempt.responseExcerpt === null ? '—' : html`<pre>${attempt.responseExcerpt}</pre>`}</td>
          </tr>`,
  );
  return html`<article class="delivery" aria-labelledby="${headingId}">
      <h2 id="${headingId}">${delivery.event} · <span class="status status-${delivery.status}">${delivery.status}</span></h2>
      <p class="meta">Delivery <code>${delivery.id}</code>, created ${when(delivery.createdAt)}${delivery.redeliveryOf ? html`, a redelivery of <code>${delivery.redeliveryOf}</code>` : ''}${delivery.status === 'pending' && delivery.nextAttemptAt ? html`; next attempt ${when(delivery.nextAttemptAt)}` : ''}</p>
      ${
        delivery.attempts.length === 0
          ? html`<p>No attempt yet.</p>`
          : html`<div class="table-wrap" role="region" aria-label="Attempts of delivery ${delivery.id}" tabindex="0">
        <table>
          <thead><tr><th scope="col">Attempt</th><th scope="col">Time</th><th scope="col">Result</th><th scope="col">Duration</th><th scope="col">Response excerpt</th></tr></thead>
          <tbody>${attempts}</tbody>
        </table>
      </div>`
      }
      ${
        delivery.status === 'failed'
          ? html`<form method="post" action="/settings/webhooks/${subscriptionId}/deliveries/${delivery.id}/redeliver">${csrfField(session)}<button type="submit">Redeliver</button></form>`
          : ''
      }
    </article>`;
}

/** A subscription's delivery log, newest first, a page at a time. */
export function deliveryLogPage(input: {
  session: PageSession;
  subscription: ListedSubscription;
  deliveries: readonly DeliveryDetail[];
  nextCursor: string | null;
  firstPage: boolean;
  notice?: string;
}): SafeHtml {
  const sub = input.subscription;
  const pager =
    input.nextCursor || !input.firstPage
      ? html`<nav class="pager" aria-label="Pages of deliveries">
      ${input.firstPage ? '' : html`<a href="/settings/webhooks/${sub.id}">Newest deliveries</a>`}
      ${input.nextCursor ? html`<a href="/settings/webhooks/${sub.id}?cursor=${encodeURIComponent(input.nextCursor)}">Older deliveries</a>` : ''}
    </nav>`
      : '';
  return layout({
    title: 'Delivery log',
    session: input.session,
    section: 'webhooks',
    body: html`<h1>Delivery log</h1>
    <p>Webhook <code>${sub.id}</code> to <strong>${sub.url}</strong> (${eventsText(sub.events)}; ${sub.status === 'active' ? 'active' : 'disabled'}, ${sub.failureCount} ${sub.failureCount === 1 ? 'failure' : 'failures'}). Newest deliveries first.</p>
    ${input.notice ? html`<p class="notice" role="status">${input.notice}</p>` : ''}
    ${input.deliveries.length === 0 ? html`<p>No deliveries${input.firstPage ? ' yet' : ' on this page'}.</p>` : input.deliveries.map((d) => deliveryArticle(input.session, sub.id, d))}
    ${pager}
    <p><a href="/settings/webhooks">Back to webhooks</a></p>`,
  });
}

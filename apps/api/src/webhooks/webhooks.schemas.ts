import { EVENT_TYPES, ValidationError, WILDCARD_EVENT } from '@svc/core';
import { bodyValidator } from '../http/openapi-validators.js';
import { WEBHOOK_URL_MAX_LENGTH } from '../openapi/webhooks.openapi.js';

export { WEBHOOK_URL_MAX_LENGTH };

// The rules live in the OpenAPI document (openapi/webhooks.openapi.ts); these are compiled from it,
// one part at a time so that each failure keeps its own code and message.
const isUrlShape = bodyValidator<string>('WebhookUrl');
const isEventList = bodyValidator<string[]>('WebhookEventList');

function isObjectBody(body: unknown): body is Record<string, unknown> {
  return typeof body === 'object' && body !== null && !Array.isArray(body);
}

export interface CreateSubscriptionInput {
  url: string;
  events: string[];
}

const URL_RULE = `url must be a valid URL starting with https:// and at most ${WEBHOOK_URL_MAX_LENGTH} characters`;
const EVENTS_RULE = `events must be a non-empty array of ${EVENT_TYPES.join(', ')}, or ["*"] alone`;

function parseUrl(value: unknown): string {
  if (value === undefined) throw new ValidationError('invalid_url', `url is missing; ${URL_RULE}.`);
  if (!isUrlShape(value)) throw new ValidationError('invalid_url', `${URL_RULE}.`);
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    throw new ValidationError('invalid_url', `url is not a valid URL; ${URL_RULE}.`);
  }
  if (parsed.protocol !== 'https:' || !parsed.hostname || /[\s\u0000-\u001f\u007f]/.test(value)) {
    throw new ValidationError('invalid_url', `url is not a valid URL; ${URL_RULE}.`);
  }
  return value;
}

function parseEvents(value: unknown): string[] {
  if (value === undefined) throw new ValidationError('invalid_events', `events is missing; ${EVENTS_RULE}.`);
  if (!isEventList(value)) throw new ValidationError('invalid_events', `${EVENTS_RULE}.`);
  const events = [...new Set(value)];
  if (events.includes(WILDCARD_EVENT) && events.length > 1) {
    throw new ValidationError('invalid_events', `"*" covers every event and must stand alone; ${EVENTS_RULE}.`);
  }
  return events;
}

/** Validates a POST /api/v1/webhooks body; unknown extra fields are ignored. */
export function parseCreateSubscription(body: unknown): CreateSubscriptionInput {
  if (!isObjectBody(body)) {
    throw new ValidationError('invalid_body', 'The request body must be a JSON object with url and events.');
  }
  const fields = body;
  return { url: parseUrl(Object.hasOwn(fields, 'url') ? fields.url : undefined), events: parseEvents(Object.hasOwn(fields, 'events') ? fields.events : undefined) };
}

import { InvalidArgumentError } from 'commander';
import { EVENT_TYPES, MAX_ROTATION_OVERLAP_SECONDS, WILDCARD_EVENT } from '@svc/core';
import { parseSeconds } from '../options/option-parsers.js';

// The API's rules for what `svc webhooks` takes, as its OpenAPI document states them
// (apps/api/src/openapi/webhooks.openapi.ts: WebhookUrl, WebhookEventList, OverlapSeconds,
// RecoveryTime), which its request validators compile. svc cannot import apps/api, and core
// does not check a subscription's url or events itself, so they are restated here with core's
// own constants (EVENT_TYPES, WILDCARD_EVENT, MAX_ROTATION_OVERLAP_SECONDS, the ones the
// document imports); apps/cli/test/webhooks.test.ts holds every rule against the API's own
// compiled validator, so the two cannot drift apart unnoticed.

/** WebhookUrl's maxLength (spec §4.3, §8). */
export const WEBHOOK_URL_MAX_LENGTH = 500;

/**
 * WebhookUrl: https:// with a host right after it, at most 500 characters (counted as JSON Schema
 * counts, in code points), no whitespace or control character, and a URL Node can parse.
 */
export function isWebhookUrl(value: string): boolean {
  const length = [...value].length;
  if (length < 'https://'.length + 1 || length > WEBHOOK_URL_MAX_LENGTH) return false;
  if (!/^[Hh][Tt][Tt][Pp][Ss]:\/\/[^/\\]/.test(value) || /[\s\u0000-\u001f\u007f]/.test(value)) return false;
  try {
    const url = new URL(value);
    return url.protocol === 'https:' && url.hostname !== '';
  } catch {
    return false;
  }
}

/** WebhookEventList: at least one event type of spec §6.1, or `*` alone. */
export function isWebhookEventList(events: readonly string[]): boolean {
  const known: readonly string[] = [...EVENT_TYPES, WILDCARD_EVENT];
  if (events.length === 0 || !events.every((event) => known.includes(event))) return false;
  return !events.includes(WILDCARD_EVENT) || events.every((event) => event === WILDCARD_EVENT);
}

/** `--url`, by WebhookUrl. */
export function parseWebhookUrl(value: string): string {
  if (!isWebhookUrl(value)) throw new InvalidArgumentError(`It must be a valid URL starting with https:// and at most ${WEBHOOK_URL_MAX_LENGTH} characters.`);
  return value;
}

/** `--events e1,e2`, by WebhookEventList; spaces around commas are ignored and repeats dropped, as the API drops them. */
export function parseEventList(value: string): string[] {
  const events = [
    ...new Set(
      value
        .split(',')
        .map((event) => event.trim())
        .filter((event) => event !== ''),
    ),
  ];
  if (!isWebhookEventList(events)) throw new InvalidArgumentError(`It must be a comma-separated list of ${EVENT_TYPES.join(', ')}, or * alone.`);
  return events;
}

/** `--overlap`, by OverlapSeconds: a whole number of seconds from 0 to 604800 (7 days). */
export function parseOverlapSeconds(value: string): number {
  const seconds = parseSeconds(value);
  if (seconds > MAX_ROTATION_OVERLAP_SECONDS) throw new InvalidArgumentError(`It must be a whole number of seconds from 0 to ${MAX_ROTATION_OVERLAP_SECONDS}.`);
  return seconds;
}

/** RFC 3339's date-time (JSON Schema's `date-time`): the date, `T` (or a space), the time and an offset. */
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}(:?\d{2})?)$/;

/**
 * RecoveryTime: an ISO 8601 time with its offset that names an instant, as the API reads it
 * (`new Date(...)` after the format check): a day that exists, a time of day, and an offset.
 */
export function parseInstant(value: string): Date {
  const parts = DATE_TIME.exec(value);
  const [year, month, day, hour, minute, second] = (parts ?? []).slice(1, 7).map(Number) as number[];
  const instant = new Date(value);
  const valid =
    parts !== null &&
    month! >= 1 &&
    month! <= 12 &&
    day! >= 1 &&
    day! <= new Date(Date.UTC(year!, month!, 0)).getUTCDate() &&
    hour! <= 23 &&
    minute! <= 59 &&
    second! <= 59 &&
    !Number.isNaN(instant.getTime());
  if (!valid) throw new InvalidArgumentError('It must be an ISO 8601 time with its offset, such as 2026-11-20T00:00:00Z.');
  return instant;
}

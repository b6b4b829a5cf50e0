import { MAX_ATTEMPTS } from '../deliveries/delivery-limits.js';
import type { DeliveryJob, FanoutJob } from './queues.js';

/**
 * What a producer that does not load BullMQ (`svc`, apps/cli/src/announcements/announcing-queues.ts)
 * sends instead of its jobs: a Postgres NOTIFY on this channel, after its commit, whose payload
 * is the JSON of a JobsAnnouncement; dispatchers LISTEN (apps/dispatcher/src/announcements/).
 * Both sides take the channel, the shape and its parser from here. See docs/adr/0015.
 */
export const JOBS_ANNOUNCED_CHANNEL = 'svc_jobs_announced';

/**
 * One notification's payload, as JSON: the queue prefix the jobs belong in (a dispatcher of
 * another prefix ignores them) and the jobs, as the producer would have queued them.
 */
export interface JobsAnnouncement {
  prefix: string;
  fanout?: FanoutJob[];
  deliveries?: DeliveryJob[];
}

/** An announcement as a dispatcher reads it: both lists present, only the jobs' own fields. */
export type ParsedJobsAnnouncement = Required<JobsAnnouncement>;

/**
 * The announcement in a payload, or undefined for one that is not (malformed JSON, wrong
 * shapes). Only ids and attempt numbers are taken from it: a job names rows, and the claim
 * checks every row against Postgres as for any other job.
 */
export function parseJobsAnnouncement(payload: string): ParsedJobsAnnouncement | undefined {
  let value: unknown;
  try {
    value = JSON.parse(payload);
  } catch {
    return undefined;
  }
  if (!isRecord(value) || typeof value.prefix !== 'string') return undefined;
  const fanout = value.fanout ?? [];
  const deliveries = value.deliveries ?? [];
  if (!Array.isArray(fanout) || !Array.isArray(deliveries)) return undefined;
  if (!fanout.every(isFanoutJob) || !deliveries.every(isDeliveryJob)) return undefined;
  return {
    prefix: value.prefix,
    fanout: fanout.map((job) => ({ eventId: job.eventId })),
    deliveries: deliveries.map((job) => ({ deliveryId: job.deliveryId, subscriptionId: job.subscriptionId, attempt: job.attempt })),
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isFanoutJob(value: unknown): value is FanoutJob {
  return isRecord(value) && typeof value.eventId === 'string' && value.eventId !== '';
}

function isDeliveryJob(value: unknown): value is DeliveryJob {
  return (
    isRecord(value) &&
    typeof value.deliveryId === 'string' &&
    value.deliveryId !== '' &&
    typeof value.subscriptionId === 'string' &&
    value.subscriptionId !== '' &&
    Number.isInteger(value.attempt) &&
    (value.attempt as number) >= 1 &&
    (value.attempt as number) <= MAX_ATTEMPTS
  );
}

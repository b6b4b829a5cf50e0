import type { DeliveryAttemptSummary, DeliveryDetail, DeliverySummary } from '@svc/core';
import { iso } from '../http/iso.js';


function presentAttempt(attempt: DeliveryAttemptSummary) {
  return {
    n: attempt.n,
    at: attempt.at.toISOString(),
    statusCode: attempt.statusCode,
    error: attempt.error,
    durationMs: attempt.durationMs,
  };
}

function presentFields(delivery: Omit<DeliverySummary, 'attempts'>) {
  return {
    id: delivery.id,
    eventId: delivery.eventId,
    event: delivery.event,
    status: delivery.status,
    createdAt: delivery.createdAt.toISOString(),
    nextAttemptAt: iso(delivery.nextAttemptAt),
    redeliveryOf: delivery.redeliveryOf,
  };
}

/** Issue 10 §1: `<delivery>` as the log and the redelivery answer show it. */
export function presentDelivery(delivery: DeliverySummary) {
  return { ...presentFields(delivery), attempts: delivery.attempts.map(presentAttempt) };
}

/** The detail: `<delivery>` plus the payload exactly as sent and each attempt's response excerpt. */
export function presentDeliveryDetail(delivery: DeliveryDetail) {
  return {
    ...presentFields(delivery),
    // The stored body is the JSON text we built and sent; parsing it back gives the same value.
    payload: JSON.parse(delivery.body) as unknown,
    attempts: delivery.attempts.map((attempt) => ({ ...presentAttempt(attempt), responseExcerpt: attempt.responseExcerpt, responseExcerptBase64: attempt.responseExcerptBase64 })),
  };
}

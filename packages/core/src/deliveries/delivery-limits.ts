/** Spec §3.3, §8: attempts per delivery. */
export const MAX_ATTEMPTS = 7;

/** An attempt's lease is the delivery timeout plus this: time to record the outcome after the POST. */
export const ATTEMPT_LEASE_MARGIN_MS = 5_000;

export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

/**
 * Claims of one attempt without a recorded outcome after which the delivery is failed instead of
 * sent again (issue 8): a lost lease (a dispatcher killed mid-attempt) is claimed again, but an
 * attempt whose outcome cannot be recorded must not be sent without end.
 */
export const MAX_CLAIMS_PER_ATTEMPT = 3;

/** The failure_reason of a delivery failed by MAX_CLAIMS_PER_ATTEMPT. */
export function unrecordedAttemptReason(attempt: number): string {
  return `attempt ${attempt} claimed ${MAX_CLAIMS_PER_ATTEMPT} times without a recorded outcome`;
}

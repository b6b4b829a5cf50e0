/** Spec §3.3, §8: attempts per delivery. */
export const MAX_ATTEMPTS = 7;

/** An attempt's lease is the delivery timeout plus this: time to record the outcome after the POST. */
export const ATTEMPT_LEASE_MARGIN_MS = 5_000;

export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

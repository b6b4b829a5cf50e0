// @svc/core/dispatcher: the dispatcher's own statements (fan-out, claims, records, sweep,
// retention). They act on deliveries whatever their account; apps/api never imports this entry.
export * from './batching/micro-batcher.js';
export * from './events/event.repository.js';
export * from './deliveries/claim-attempt.js';
export * from './deliveries/subscription-accounts.js';
export * from './deliveries/record-attempt.js';
export * from './deliveries/fan-out.js';
export * from './deliveries/sweep.repository.js';
export * from './deliveries/delivery-stats.repository.js';
export * from './deliveries/retention.repository.js';

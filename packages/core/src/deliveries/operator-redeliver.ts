/** The operator's redelivery (svc deliveries redeliver): unscoped, never reached by a customer's request. */
import { redeliver, type Redelivery, type RedeliveryDeps } from './redeliver.js';

/** As redeliverSubscriptionDelivery, for any account's delivery, named by its id alone. */
export async function redeliverAnyDelivery(deps: RedeliveryDeps, deliveryId: string): Promise<Redelivery> {
  return redeliver(deps, deliveryId, { anyAccount: true }, `delivery ${deliveryId} does not exist (or its subscription was revoked)`);
}

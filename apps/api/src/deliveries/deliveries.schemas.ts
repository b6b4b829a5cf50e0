import type { DeliveryStatus } from '@svc/core';

/** Issue 10 §1: page sizes of the delivery log. */
export const DELIVERY_PAGE_LIMIT_MAX = 100;
export const DELIVERY_PAGE_LIMIT_DEFAULT = 50;
/** Far above any cursor we issue (about 90 characters), so junk is refused before decoding. */
export const DELIVERY_CURSOR_MAX_LENGTH = 512;
export const DELIVERY_STATUSES: readonly DeliveryStatus[] = ['pending', 'delivered', 'failed'];

/** The parsed query of GET /api/v1/webhooks/{subscriptionId}/deliveries (its rules: deliveries.openapi.ts). */
export interface DeliveryListQuery {
  limit: number;
  cursor?: string;
  status?: DeliveryStatus;
}

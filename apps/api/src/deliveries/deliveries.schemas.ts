import { Ajv, type ErrorObject } from 'ajv';
import { InvalidQueryError, type DeliveryStatus } from '@svc/core';

/** Issue 10 §1: page sizes of the delivery log. */
export const DELIVERY_PAGE_LIMIT_MAX = 100;
export const DELIVERY_PAGE_LIMIT_DEFAULT = 50;
/** Far above any cursor we issue (about 90 characters), so junk is refused before decoding. */
export const DELIVERY_CURSOR_MAX_LENGTH = 512;
export const DELIVERY_STATUSES: readonly DeliveryStatus[] = ['pending', 'delivered', 'failed'];

/**
 * The query of GET /api/v1/webhooks/{subscriptionId}/deliveries, as plain JSON Schema. Query
 * values arrive as text, so each parameter is described as the text it must be: `limit` a
 * decimal 1..100 without sign, exponent or leading zero; a repeated parameter (an array) fails.
 * Unknown parameters are ignored (spec §9).
 */
export const deliveryListQuerySchema = {
  type: 'object',
  properties: {
    limit: { type: 'string', pattern: '^(100|[1-9][0-9]?)$' },
    cursor: { type: 'string', minLength: 1, maxLength: DELIVERY_CURSOR_MAX_LENGTH, pattern: '^[A-Za-z0-9_-]+$' },
    status: { type: 'string', enum: [...DELIVERY_STATUSES] },
  },
} as const;

const ajv = new Ajv({ allErrors: false, strict: true });
const isDeliveryListQuery = ajv.compile<{ limit?: string; cursor?: string; status?: DeliveryStatus }>(deliveryListQuerySchema);

const RULES: Record<string, string> = {
  limit: `limit must be a whole number from 1 to ${DELIVERY_PAGE_LIMIT_MAX} (default ${DELIVERY_PAGE_LIMIT_DEFAULT}), given once`,
  cursor: 'cursor must be the nextCursor of a previous page, unchanged, given once',
  status: `status must be one of ${DELIVERY_STATUSES.join(', ')}, given once`,
};

/** The parameter an ajv error is about: `/limit` → `limit`. */
function parameterOf(error: ErrorObject | undefined): string {
  return error?.instancePath.split('/')[1] ?? 'query';
}

export interface DeliveryListQuery {
  limit: number;
  cursor: string | undefined;
  status: DeliveryStatus | undefined;
}

/** Validates the log's query; a bad parameter is invalid_query naming it. The cursor is decoded by delivery-cursor.ts. */
export function parseDeliveryListQuery(query: unknown): DeliveryListQuery {
  if (!isDeliveryListQuery(query)) {
    const parameter = parameterOf(isDeliveryListQuery.errors?.[0]);
    throw new InvalidQueryError(parameter, `${RULES[parameter] ?? 'the query string cannot be used'}.`);
  }
  return {
    limit: query.limit === undefined ? DELIVERY_PAGE_LIMIT_DEFAULT : Number(query.limit),
    cursor: query.cursor,
    status: query.status,
  };
}

import { SCAN_HISTORY_MAX_LIMIT, SCORE_BREAKDOWN_MAX_ENTRIES, CATEGORY_NAME_MAX_LENGTH } from '@svc/core';
import { apiStandardResponses, apiSuccess, dataEnvelope, notFound, requiresScope } from './common.openapi.js';
import { EXAMPLE_HISTORY_NEXT_CURSOR, EXAMPLE_HISTORY_SCANS, EXAMPLE_IDS, EXAMPLE_SCAN } from './examples.js';
import { ref, type OpenApiModule } from './openapi-types.js';

const trigger = { type: 'string', enum: ['scheduled', 'manual'], description: 'Who started the scan.' };

/** Issue 9: the score history and one scan's detail. */
export const scans: OpenApiModule = {
  tag: { name: 'Scans', description: 'The score history of a site and the detail of one scan (scope `read:scans`).' },
  parameters: {
    ScanId: { name: 'scanId', in: 'path', required: true, description: 'A scan id. Opaque.', schema: { type: 'string' }, example: EXAMPLE_IDS.scan },
    HistoryLimit: {
      name: 'limit',
      in: 'query',
      description: `The most scans in the page, 1 to ${SCAN_HISTORY_MAX_LIMIT}; ${SCAN_HISTORY_MAX_LIMIT} when absent.`,
      schema: { type: 'integer', minimum: 1, maximum: SCAN_HISTORY_MAX_LIMIT, default: SCAN_HISTORY_MAX_LIMIT },
      example: 20,
      'x-rule': `an integer from 1 to ${SCAN_HISTORY_MAX_LIMIT}`,
    },
    HistoryCursor: {
      name: 'cursor',
      in: 'query',
      description: 'The `nextCursor` of the previous page, as it was given; opaque. Absent for the first page.',
      schema: { type: 'string', minLength: 1, maxLength: 512, pattern: '^[A-Za-z0-9_-]+$' },
      'x-rule': 'the nextCursor of a previous page, unchanged',
    },
    HistorySince: {
      name: 'since',
      in: 'query',
      description:
        'Only scans completed strictly after this instant, an RFC 3339 timestamp such as `2026-11-23T00:00:00Z` ' +
        '(`+` in an offset must be sent as `%2B`). Pass the latest `completedAt` you hold to fetch only what is new.',
      schema: { type: 'string', format: 'date-time', maxLength: 64 },
      'x-rule': 'an ISO 8601 timestamp with a time zone, such as 2026-11-23T00:00:00Z',
    },
  },
  schemas: {
    ScanTrigger: trigger,
    ScanCategory: {
      type: 'object',
      required: ['name', 'score'],
      properties: {
        name: { type: 'string', minLength: 1, maxLength: CATEGORY_NAME_MAX_LENGTH, description: 'Unique within the scan.' },
        score: { type: 'number' },
      },
    },
    HistoryScan: {
      type: 'object',
      required: ['id', 'score', 'status', 'trigger', 'startedAt', 'completedAt'],
      properties: {
        id: { type: 'string' },
        score: { type: 'number' },
        status: { const: 'completed' },
        trigger: ref('schemas', 'ScanTrigger'),
        startedAt: ref('schemas', 'Timestamp'),
        completedAt: ref('schemas', 'Timestamp'),
      },
    },
    Scan: {
      type: 'object',
      required: ['id', 'siteId', 'status', 'score', 'trigger', 'startedAt', 'completedAt', 'failedAt', 'categories'],
      properties: {
        id: { type: 'string' },
        siteId: { type: 'string' },
        status: { type: 'string', enum: ['running', 'completed', 'failed'] },
        score: { type: ['number', 'null'], description: 'null unless completed.' },
        trigger: ref('schemas', 'ScanTrigger'),
        startedAt: ref('schemas', 'Timestamp'),
        completedAt: { oneOf: [ref('schemas', 'Timestamp'), { type: 'null' }], description: 'null unless completed.' },
        failedAt: { oneOf: [ref('schemas', 'Timestamp'), { type: 'null' }], description: 'null unless failed.' },
        categories: {
          type: 'array',
          maxItems: SCORE_BREAKDOWN_MAX_ENTRIES,
          items: ref('schemas', 'ScanCategory'),
          description: 'The per-category breakdown reported when the scan completed; `[]` when none was.',
        },
      },
    },
  },
  paths: {
    '/api/v1/sites/{siteId}/scans': {
      parameters: [ref('parameters', 'SiteId')],
      get: {
        operationId: 'listSiteScans',
        summary: 'Read the score history of a site',
        description:
          'The site’s completed scans, latest `completedAt` first, ties by id. Paged by keyset on (completedAt, id): ' +
          'follow `nextCursor` until it is null; walking every page yields each scan once even while scans complete. ' +
          'Running and failed scans are not in the history; read them by id. Unknown parameters are ignored.',
        tags: ['Scans'],
        security: requiresScope('read:scans'),
        parameters: [ref('parameters', 'HistoryLimit'), ref('parameters', 'HistoryCursor'), ref('parameters', 'HistorySince')],
        responses: {
          '200': apiSuccess(
            'One page of the history.',
            dataEnvelope({
              scans: { type: 'array', maxItems: SCAN_HISTORY_MAX_LIMIT, items: ref('schemas', 'HistoryScan') },
              nextCursor: { type: ['string', 'null'], description: 'Pass as `cursor` for the next page; null on the last page.' },
            }),
            { data: { scans: EXAMPLE_HISTORY_SCANS, nextCursor: EXAMPLE_HISTORY_NEXT_CURSOR } },
          ),
          '400': ref('responses', 'InvalidQuery'),
          '404': notFound('site'),
          ...apiStandardResponses(),
        },
      },
    },
    '/api/v1/scans/{scanId}': {
      parameters: [ref('parameters', 'ScanId')],
      get: {
        operationId: 'getScan',
        summary: 'Read one scan in full',
        description: 'A scan of any status, with its per-category breakdown.',
        tags: ['Scans'],
        security: requiresScope('read:scans'),
        responses: {
          '200': apiSuccess('The scan.', dataEnvelope({ scan: ref('schemas', 'Scan') }), { data: { scan: EXAMPLE_SCAN } }),
          '404': notFound('scan'),
          ...apiStandardResponses(),
        },
      },
    },
  },
};

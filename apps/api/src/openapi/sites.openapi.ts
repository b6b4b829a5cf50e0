import { apiStandardResponses, apiSuccess, dataEnvelope, notFound, requiresScope } from './common.openapi.js';
import { EXAMPLE_IDS, EXAMPLE_SITE_DETAIL, EXAMPLE_SITES } from './examples.js';
import { ref, type OpenApiModule } from './openapi-types.js';

/** Spec §4.1, §4.2 and the site path parameter the scans and AI Monitor paths share. */
export const sites: OpenApiModule = {
  tag: { name: 'Sites', description: 'The sites of your account.' },
  parameters: {
    SiteId: {
      name: 'siteId',
      in: 'path',
      required: true,
      description: 'A site id as returned by the site list. Opaque.',
      schema: { type: 'string' },
      example: EXAMPLE_IDS.site,
    },
  },
  schemas: {
    SiteSummary: {
      type: 'object',
      required: ['id', 'domain', 'name', 'status', 'createdAt'],
      properties: {
        id: { type: 'string', description: 'Opaque; do not parse it.' },
        domain: { type: 'string', description: 'Normalized: no protocol, no `www`, no trailing slash.' },
        name: { type: ['string', 'null'], description: 'null when the account never set one.' },
        status: { type: 'string', enum: ['active', 'inactive', 'prospect'] },
        createdAt: ref('schemas', 'Timestamp'),
      },
    },
    LatestScan: {
      type: 'object',
      required: ['id', 'score', 'status', 'completedAt'],
      properties: {
        id: { type: 'string' },
        score: { type: 'number' },
        status: { const: 'completed' },
        completedAt: ref('schemas', 'Timestamp'),
      },
    },
    SiteDetail: {
      allOf: [ref('schemas', 'SiteSummary')],
      type: 'object',
      required: ['latestScan'],
      properties: {
        latestScan: {
          oneOf: [ref('schemas', 'LatestScan'), { type: 'null' }],
          description: 'The most recently completed scan; null while none has completed.',
        },
      },
    },
  },
  paths: {
    '/api/v1/sites': {
      get: {
        operationId: 'listSites',
        summary: 'List the sites of your account',
        description: 'Up to 100 sites, most recently added first, without pagination.',
        tags: ['Sites'],
        security: requiresScope('read:sites'),
        responses: {
          '200': apiSuccess('The sites.', dataEnvelope({ sites: { type: 'array', maxItems: 100, items: ref('schemas', 'SiteSummary') } }), { data: { sites: EXAMPLE_SITES } }),
          ...apiStandardResponses(),
        },
      },
    },
    '/api/v1/sites/{siteId}': {
      parameters: [ref('parameters', 'SiteId')],
      get: {
        operationId: 'getSite',
        summary: 'Read one site with its latest completed scan',
        tags: ['Sites'],
        security: requiresScope('read:sites'),
        responses: {
          '200': apiSuccess('The site.', dataEnvelope({ site: ref('schemas', 'SiteDetail') }), { data: { site: EXAMPLE_SITE_DETAIL } }),
          '404': notFound('site'),
          ...apiStandardResponses(),
        },
      },
    },
  },
};


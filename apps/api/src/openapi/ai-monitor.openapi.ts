import { ENGINE_ID_PATTERN, SCORE_BREAKDOWN_MAX_ENTRIES } from '@svc/core';
import { apiStandardResponses, apiSuccess, dataEnvelope, notFound, requiresScope } from './common.openapi.js';
import { EXAMPLE_AI_MONITOR_RUN } from './examples.js';
import { ref, type OpenApiModule } from './openapi-types.js';

/** Issue 9: the latest completed AI Monitor run of a site. */
export const aiMonitor: OpenApiModule = {
  tag: { name: 'AI Monitor', description: 'AI Monitor runs: composite score and per-engine breakdown (scope `read:ai-monitor`).' },
  schemas: {
    EngineScore: {
      type: 'object',
      required: ['engine', 'score'],
      properties: {
        engine: { type: 'string', pattern: ENGINE_ID_PATTERN.source, description: 'An engine id, unique within the run.' },
        score: { type: 'number' },
      },
    },
    AiMonitorRun: {
      type: 'object',
      required: ['id', 'siteId', 'status', 'compositeScore', 'completedAt', 'engines'],
      properties: {
        id: { type: 'string' },
        siteId: { type: 'string' },
        status: { const: 'completed' },
        compositeScore: { type: 'number' },
        completedAt: ref('schemas', 'Timestamp'),
        engines: {
          type: 'array',
          maxItems: SCORE_BREAKDOWN_MAX_ENTRIES,
          items: ref('schemas', 'EngineScore'),
          description: 'The per-engine breakdown; `[]` when none was reported.',
        },
      },
    },
  },
  paths: {
    '/api/v1/sites/{siteId}/ai-monitor/latest': {
      parameters: [ref('parameters', 'SiteId')],
      get: {
        operationId: 'getLatestAiMonitorRun',
        summary: 'Read the latest completed AI Monitor run of a site',
        description: 'The run with the latest `completedAt` (ties by id), or `run: null` when none has completed, as `latestScan` is.',
        tags: ['AI Monitor'],
        security: requiresScope('read:ai-monitor'),
        responses: {
          '200': apiSuccess('The latest run, or null.', dataEnvelope({ run: { oneOf: [ref('schemas', 'AiMonitorRun'), { type: 'null' }] } }), {
            data: { run: EXAMPLE_AI_MONITOR_RUN },
          }),
          '404': notFound('site'),
          ...apiStandardResponses(),
        },
      },
    },
  },
};

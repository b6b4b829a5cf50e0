import { EXAMPLE_ORIGIN } from './examples.js';
import type { CodeSample, OpenApiOperation, OpenApiParameter, OpenApiPathItem } from './openapi-types.js';

/** The package customers install; its samples call the method below for each operation. */
export const CLIENT_PACKAGE = '@site-visibility/client';

/** The environment variable every sample reads the API key from, as the client's README does. */
const KEY_VARIABLE = 'SVC_API_KEY';

/**
 * Each /api/v1 operation's method on SiteVisibilityClient (packages/client/src/client.ts) and the
 * name its sample gives the answer. The arguments are not listed: they are the operation's path
 * parameters in path order, then its request body, then its query parameters (code-samples test
 * runs every sample against the client to hold this to the truth). A new operation needs a line
 * here, or the document fails to build.
 */
const CLIENT_CALLS: Record<string, { method: string; result: string }> = {
  listSites: { method: 'sites.list', result: 'sites' },
  getSite: { method: 'sites.get', result: 'site' },
  listSiteScans: { method: 'scans.historyPage', result: 'page' },
  getScan: { method: 'scans.get', result: 'scan' },
  getLatestAiMonitorRun: { method: 'aiMonitor.latest', result: 'run' },
  createWebhook: { method: 'webhooks.create', result: 'subscription' },
  listWebhooks: { method: 'webhooks.list', result: 'subscriptions' },
  updateWebhook: { method: 'webhooks.update', result: 'subscription' },
  deleteWebhook: { method: 'webhooks.delete', result: 'revoked' },
  rotateWebhookSecret: { method: 'webhooks.rotateSecret', result: 'rotated' },
  recoverWebhookDeliveries: { method: 'webhooks.recover', result: 'recovery' },
  listWebhookDeliveries: { method: 'deliveries.listPage', result: 'page' },
  getWebhookDelivery: { method: 'deliveries.get', result: 'delivery' },
  redeliverWebhookDelivery: { method: 'deliveries.redeliver', result: 'delivery' },
};

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

/** A value as a TypeScript literal: single-quoted strings, bare keys where they are identifiers. */
function literal(value: unknown): string {
  if (typeof value === 'string') return `'${value.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
  if (Array.isArray(value)) return `[${value.map(literal).join(', ')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).map(([key, item]) => `${/^[A-Za-z_$][\w$]*$/.test(key) ? key : literal(key)}: ${literal(item)}`);
    return entries.length === 0 ? '{}' : `{ ${entries.join(', ')} }`;
  }
  return JSON.stringify(value);
}

/** A word for a POSIX shell, in single quotes. */
const shellWord = (text: string) => `'${text.replaceAll("'", `'\\''`)}'`;

function exampleOf(parameter: OpenApiParameter, where: string): unknown {
  if (parameter.example === undefined) throw new Error(`OpenAPI ${where}: path parameter ${parameter.name} needs an example for its code samples`);
  return parameter.example;
}

/** The curl and client samples of one operation, from its method, path, parameters' and body's examples. */
function samplesFor(path: string, method: string, operation: OpenApiOperation, parameters: OpenApiParameter[]): CodeSample[] {
  const where = `${method.toUpperCase()} ${path}`;
  const call = CLIENT_CALLS[operation.operationId];
  if (!call) throw new Error(`OpenAPI ${where}: no client method for operation ${operation.operationId} in code-samples.ts`);
  const pathParameters = (path.match(/\{[^}]+\}/g) ?? []).map((braced) => {
    const parameter = parameters.find((p) => p.in === 'path' && `{${p.name}}` === braced);
    if (!parameter) throw new Error(`OpenAPI ${where}: path parameter ${braced} is not described`);
    return { name: parameter.name, value: exampleOf(parameter, where) };
  });
  const query = Object.fromEntries(parameters.filter((p) => p.in === 'query' && p.example !== undefined).map((p) => [p.name, p.example]));
  const content = (operation.requestBody as { content?: Record<string, { example?: unknown }> } | undefined)?.content;
  const body = content?.['application/json']?.example;
  if (operation.requestBody && body === undefined) throw new Error(`OpenAPI ${where}: its request body needs an example for its code samples`);

  const filled = pathParameters.reduce((url, { name, value }) => url.replace(`{${name}}`, encodeURIComponent(String(value))), path);
  const search = new URLSearchParams(Object.entries(query).map(([name, value]): [string, string] => [name, String(value)])).toString();
  const curl = [
    `curl ${method === 'get' ? '' : `-X ${method.toUpperCase()} `}${shellWord(`${EXAMPLE_ORIGIN}${filled}${search ? `?${search}` : ''}`)}`,
    `-H "Authorization: Bearer $${KEY_VARIABLE}"`,
    ...(body === undefined ? [] : [`-H 'Content-Type: application/json'`, `-d ${shellWord(JSON.stringify(body))}`]),
  ].join(' \\\n  ');

  const args = [
    ...pathParameters.map(({ value }) => literal(value)),
    ...(body === undefined ? [] : [literal(body)]),
    ...(Object.keys(query).length === 0 ? [] : [literal(query)]),
  ];
  const client = [
    `import { SiteVisibilityClient } from '${CLIENT_PACKAGE}';`,
    '',
    `const client = new SiteVisibilityClient({ apiKey: process.env.${KEY_VARIABLE}!, baseUrl: '${EXAMPLE_ORIGIN}' });`,
    '',
    `const ${call.result} = await client.${call.method}(${args.join(', ')});`,
  ].join('\n');

  return [
    { lang: 'curl', label: 'curl', source: curl },
    { lang: 'TypeScript', label: CLIENT_PACKAGE, source: client },
  ];
}

/**
 * The paths with `x-codeSamples` on every /api/v1 operation: a curl command and a call of the
 * client library, both made from the operation's own examples, so the samples change with it.
 * Parameters must already be written out (document.ts inlines them first).
 */
export function withCodeSamples(paths: Record<string, OpenApiPathItem>): Record<string, OpenApiPathItem> {
  return Object.fromEntries(
    Object.entries(paths).map(([path, item]) => {
      if (!path.startsWith('/api/v1/')) return [path, item];
      const copy: OpenApiPathItem = { ...item };
      for (const method of METHODS) {
        const operation = item[method];
        if (!operation) continue;
        const parameters = [...(item.parameters ?? []), ...(operation.parameters ?? [])] as OpenApiParameter[];
        copy[method] = { ...operation, 'x-codeSamples': samplesFor(path, method, operation, parameters) };
      }
      return [path, copy];
    }),
  );
}

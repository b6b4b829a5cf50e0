import { describe, expect, it } from '@jest/globals';
import { openApiDocument } from '../src/openapi/document.js';
import type { CodeSample, OpenApiOperation, OpenApiParameter, OpenApiPathItem } from '../src/openapi/openapi-types.js';

/**
 * The `x-codeSamples` of every /api/v1 operation, held to the operation and to the real client
 * library: each client sample's call is run on a SiteVisibilityClient whose fetch records what it
 * would send, and must send exactly the operation's method, path, body and query.
 */

const CLIENT_PACKAGE = '@site-visibility/client';
const ORIGIN = 'https://visibility.example.com';
const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

interface ApiOperation {
  path: string;
  method: (typeof METHODS)[number];
  operation: OpenApiOperation;
  parameters: OpenApiParameter[];
}

const operations: ApiOperation[] = Object.entries(openApiDocument.paths as Record<string, OpenApiPathItem>)
  .filter(([path]) => path.startsWith('/api/v1/'))
  .flatMap(([path, item]) =>
    METHODS.flatMap((method) => {
      const operation = item[method];
      return operation ? [{ path, method, operation, parameters: [...(item.parameters ?? []), ...(operation.parameters ?? [])] as OpenApiParameter[] }] : [];
    }),
  );

type Client = Record<string, Record<string, unknown>>;
interface Sent {
  method: string;
  url: URL;
  body: unknown;
}

/**
 * The client library as customers import it, by its package name (resolved at run time: the API
 * is built before the client). Its fetch records each request and answers with `answer`.
 */
async function recordingClient(answer: { status: number; body: unknown }): Promise<{ client: Client; sent: Sent[] }> {
  const specifier = CLIENT_PACKAGE;
  const { SiteVisibilityClient } = (await import(specifier)) as { SiteVisibilityClient: new (options: Record<string, unknown>) => Client };
  const sent: Sent[] = [];
  const fetch = async (input: URL | string, init: { method: string; body?: string }) => {
    sent.push({ method: init.method, url: new URL(String(input)), body: init.body === undefined ? undefined : JSON.parse(init.body) });
    return new Response(JSON.stringify(answer.body), { status: answer.status, headers: { 'content-type': 'application/json', 'request-id': '7f0c3f9e-0b7c-4c1e-9d35-2f0b1a8e4d11' } });
  };
  return { client: new SiteVisibilityClient({ apiKey: 'svc_live_sample', baseUrl: ORIGIN, fetch, maxRetries: 0 }), sent };
}

const samplesOf = (operation: OpenApiOperation): CodeSample[] => operation['x-codeSamples'] ?? [];
const where = ({ method, path }: ApiOperation) => `${method.toUpperCase()} ${path}`;
/** The operation's path as a pattern any value of its parameters fills. */
const pathPattern = (path: string) => new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/?]+')}$`);
/** The operation's path with its parameters' examples in it. */
const examplePath = ({ path, parameters }: ApiOperation) =>
  path.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(String(parameters.find((p) => p.in === 'path' && p.name === name)?.example)));
const bodyExample = ({ operation }: ApiOperation) => (operation.requestBody as { content?: Record<string, { example?: unknown }> } | undefined)?.content?.['application/json']?.example;
const queryExamples = ({ parameters }: ApiOperation) => Object.fromEntries(parameters.filter((p) => p.in === 'query' && p.example !== undefined).map((p) => [p.name, String(p.example)]));
/** The operation's documented success and its example. */
function success({ operation }: ApiOperation): { status: number; body: unknown } {
  const [status, response] = Object.entries(operation.responses).find(([code]) => /^2\d\d$/.test(code))!;
  return { status: Number(status), body: (response as { content: Record<string, { example: unknown }> }).content['application/json']!.example };
}

describe('the code samples of the reference', () => {
  it('are on every /api/v1 operation: a curl command and a call of the client library', () => {
    const shapes = operations.map((op) => ({ at: where(op), samples: samplesOf(op.operation).map(({ lang, label }) => ({ lang, label })) }));

    expect(operations.length).toBeGreaterThanOrEqual(14);
    expect(shapes).toEqual(
      operations.map((op) => ({
        at: where(op),
        samples: [
          { lang: 'curl', label: 'curl' },
          { lang: 'TypeScript', label: CLIENT_PACKAGE },
        ],
      })),
    );
    for (const op of operations) {
      const client = samplesOf(op.operation)[1]!.source;
      expect({ at: where(op), imports: client.includes(`import { SiteVisibilityClient } from '${CLIENT_PACKAGE}';`) }).toEqual({ at: where(op), imports: true });
    }
  });

  it('call, in curl, the operation’s own method and path, with its example body and query and the API key', () => {
    for (const op of operations) {
      const curl = samplesOf(op.operation)[0]!.source;
      const url = new URL(/^curl (?:-X [A-Z]+ )?'([^']+)'/.exec(curl)?.[1] ?? 'http://unparsed');
      const data = /-d '((?:[^']|'\\'')*)'$/.exec(curl)?.[1]?.replaceAll(`'\\''`, "'");

      expect({
        at: where(op),
        method: /^curl -X ([A-Z]+) /.exec(curl)?.[1] ?? 'GET',
        origin: url.origin,
        path: url.pathname,
        matchesTemplate: pathPattern(op.path).test(url.pathname),
        query: Object.fromEntries(url.searchParams),
        body: data === undefined ? undefined : JSON.parse(data),
        key: curl.includes(`-H "Authorization: Bearer $SVC_API_KEY"`),
        json: data === undefined || curl.includes(`-H 'Content-Type: application/json'`),
      }).toEqual({
        at: where(op),
        method: op.method.toUpperCase(),
        origin: ORIGIN,
        path: examplePath(op),
        matchesTemplate: true,
        query: queryExamples(op),
        body: bodyExample(op),
        key: true,
        json: true,
      });
    }
  });

  it('name methods the client library has, and each call sends the operation’s method, path, body and query', async () => {
    for (const op of operations) {
      const source = samplesOf(op.operation)[1]!.source;
      const { client, sent } = await recordingClient(success(op));
      const named = [...source.matchAll(/client\.(\w+)\.(\w+)\(/g)].map(([, group, method]) => `${group}.${method}`);
      const call = /^const \w+ = await (client\.\w+\.\w+\(.*\));$/m.exec(source)?.[1];

      expect({ at: where(op), named: named.length > 0, missing: named.filter((name) => typeof client[name.split('.')[0]!]?.[name.split('.')[1]!] !== 'function') }).toEqual({
        at: where(op),
        named: true,
        missing: [],
      });
      expect({ at: where(op), call: typeof call }).toEqual({ at: where(op), call: 'string' });
      // The call as written in the sample (its arguments are plain literals), on the recording client.
      await (new Function('client', `return ${call};`) as (client: Client) => Promise<unknown>)(client);

      expect({ at: where(op), sent: sent.map(({ method, url, body }) => ({ method, origin: url.origin, path: url.pathname, query: Object.fromEntries(url.searchParams), body })) }).toEqual({
        at: where(op),
        sent: [{ method: op.method.toUpperCase(), origin: ORIGIN, path: examplePath(op), query: queryExamples(op), body: bodyExample(op) }],
      });
    }
  });
});

import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { validatorAt } from '../src/http/openapi-validators.js';
import { completeOpenApiDocument as openApiDocument } from '../src/openapi/document.js';
import type { OpenApiPathItem } from '../src/openapi/openapi-types.js';

/** One response as the client got it. */
export interface ObservedResponse {
  method: string;
  path: string;
  status: number;
  headers: OutgoingHttpHeaders | IncomingHttpHeaders;
  body: Buffer;
}

type Json = Record<string, unknown>;

const seg = (s: string) => s.replaceAll('~', '~0').replaceAll('/', '~1');

/** Path templates, literal ones first, so `/docs` wins over a template that could also match. */
const TEMPLATES = Object.keys(openApiDocument.paths)
  .map((template) => ({
    template,
    pattern: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`),
    params: (template.match(/\{/g) ?? []).length,
  }))
  .sort((a, b) => a.params - b.params);

/** Follows a `$ref` into the document; returns the object and its JSON pointer. */
function deref(value: Json, pointer: string): { value: Json; pointer: string } {
  const target = value.$ref;
  if (typeof target !== 'string') return { value, pointer };
  const path = target.replace(/^#/, '');
  const resolved = path
    .split('/')
    .slice(1)
    .reduce<unknown>((node, key) => (node as Json)[key.replaceAll('~1', '/').replaceAll('~0', '~')], openApiDocument);
  return deref(resolved as Json, path);
}

function headerValue(headers: ObservedResponse['headers'], name: string): string | undefined {
  const value = headers[name.toLowerCase()];
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value.join(', ') : String(value);
}

function schemaProblems(pointer: string, value: unknown, what: string): string[] {
  const validate = validatorAt(pointer);
  if (validate(value)) return [];
  return [`${what} does not match ${pointer}: ${JSON.stringify(validate.errors?.slice(0, 3))}`];
}

function checkHeaders(response: Json, responsePointer: string, observed: ObservedResponse): string[] {
  const problems: string[] = [];
  for (const [name, declared] of Object.entries((response.headers ?? {}) as Json)) {
    const { value: header, pointer } = deref(declared as Json, `${responsePointer}/headers/${seg(name)}`);
    const actual = headerValue(observed.headers, name);
    if (actual === undefined) {
      if (header.required) problems.push(`header ${name} is missing`);
      continue;
    }
    const schema = header.schema as Json;
    const typed = schema.type === 'integer' && /^-?\d+$/.test(actual) ? Number(actual) : actual;
    problems.push(...schemaProblems(`${pointer}/schema`, typed, `header ${name}: ${JSON.stringify(actual)}`));
  }
  return problems;
}

function checkBody(response: Json, responsePointer: string, observed: ObservedResponse): string[] {
  const content = response.content as Json | undefined;
  if (!content || observed.method === 'HEAD') return [];
  const contentType = (headerValue(observed.headers, 'content-type') ?? '').split(';')[0]?.trim() ?? '';
  if (!Object.hasOwn(content, contentType)) {
    return [`content type ${JSON.stringify(contentType)} is not one of ${Object.keys(content).join(', ')}`];
  }
  const schemaPointer = `${responsePointer}/content/${seg(contentType)}/schema`;
  if (contentType !== 'application/json') return schemaProblems(schemaPointer, observed.body.toString('utf8'), 'body');
  let body: unknown;
  try {
    body = JSON.parse(observed.body.toString('utf8'));
  } catch {
    return ['body is not JSON'];
  }
  return schemaProblems(schemaPointer, body, `body ${observed.body.toString('utf8').slice(0, 300)}`);
}

/** What a path the document does not describe may answer: the error envelope (or a bare 5xx) with a Request-Id. */
function checkUndocumented(observed: ObservedResponse): string[] {
  const problems: string[] = [];
  if (headerValue(observed.headers, 'request-id') === undefined) problems.push('header Request-Id is missing');
  if (observed.status >= 500) return problems;
  if (![401, 404, 429].includes(observed.status)) problems.push(`status ${observed.status} on an undocumented route (only 401, 404, 429 or 5xx)`);
  let body: unknown;
  try {
    body = JSON.parse(observed.body.toString('utf8'));
  } catch {
    return [...problems, 'body is not JSON'];
  }
  return [...problems, ...schemaProblems('/components/schemas/ErrorEnvelope', body, 'body')];
}

/**
 * Every way this response drifts from the OpenAPI document: an undocumented status, a missing
 * or malformed header, a content type or body its schema does not allow. Empty when it conforms.
 */
export function contractProblems(observed: ObservedResponse): string[] {
  // Settings is HTML for a browser, not part of the API the document describes (settings.test.ts checks its pages).
  if (observed.path === '/settings' || observed.path.startsWith('/settings/')) return [];
  const method = observed.method.toLowerCase() === 'head' ? 'get' : observed.method.toLowerCase();
  const match = TEMPLATES.find(({ pattern }) => pattern.test(observed.path));
  const item = match ? ((openApiDocument.paths as Record<string, OpenApiPathItem>)[match.template] as Json) : undefined;
  const operation = item?.[method] as Json | undefined;
  if (!match || !operation) return checkUndocumented(observed);
  const responses = operation.responses as Json;
  const status = String(observed.status);
  const key = [status, `${status[0]}XX`, 'default'].find((candidate) => Object.hasOwn(responses, candidate));
  if (!key) return [`status ${status} is not documented`];
  const { value: response, pointer } = deref(responses[key] as Json, `/paths/${seg(match.template)}/${method}/responses/${key}`);
  return [...checkHeaders(response, pointer, observed), ...checkBody(response, pointer, observed)];
}

/** Drift found since the last drain, one message per response. */
const violations: string[] = [];

/** Returns and forgets what drifted; the test support fails the running test with it. */
export function drainContractViolations(): string[] {
  return violations.splice(0, violations.length);
}

/** Records the response this middleware sees as it is written, and checks it once it is sent. */
function recordResponse(req: Request, res: Response, next: NextFunction): void {
  const chunks: Buffer[] = [];
  const write = res.write.bind(res) as (...args: unknown[]) => boolean;
  const end = res.end.bind(res) as (...args: unknown[]) => Response;
  const keep = (chunk: unknown, encoding: unknown) => {
    if (chunk === undefined || chunk === null || typeof chunk === 'function') return;
    chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8'));
  };
  res.write = ((chunk: unknown, encoding?: unknown, callback?: unknown) => {
    keep(chunk, encoding);
    return write(chunk, encoding, callback);
  }) as Response['write'];
  res.end = ((chunk?: unknown, encoding?: unknown, callback?: unknown) => {
    keep(chunk, encoding);
    return end(chunk, encoding, callback);
  }) as Response['end'];
  const path = req.originalUrl.split('?')[0] ?? req.originalUrl;
  res.on('finish', () => {
    const problems = contractProblems({ method: req.method, path, status: res.statusCode, headers: res.getHeaders(), body: Buffer.concat(chunks) });
    if (problems.length > 0) violations.push(`${req.method} ${req.originalUrl} → ${res.statusCode}:\n  ${problems.join('\n  ')}`);
  });
  next();
}

/** The app behind a recorder: whatever a test sends it, each response is checked against the document. */
export function contractChecked(app: Express): Express {
  const outer = express();
  outer.disable('x-powered-by');
  outer.set('etag', false);
  outer.use(recordResponse);
  outer.use(app);
  return outer;
}

/**
 * The few OpenAPI 3.1 shapes the document's modules are written in. Schemas are plain JSON
 * Schema 2020-12 objects: ajv compiles them as they are.
 */
export type JsonSchema = Record<string, unknown>;

export interface OpenApiParameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required?: boolean;
  description?: string;
  schema: JsonSchema;
  /** A value the service accepts, which "Try it out" starts from. */
  example?: unknown;
  /** Our extension: what a valid value is, ending the invalid_query message "<name> must be <x-rule>." */
  'x-rule'?: string;
}

export type Ref = { $ref: string };

export interface OpenApiOperation {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  security?: Array<Record<string, string[]>>;
  parameters?: Array<OpenApiParameter | Ref>;
  requestBody?: Record<string, unknown>;
  responses: Record<string, Record<string, unknown> | Ref>;
  /**
   * For operators, not customers (a probe, a file of the reference page): left out of the
   * document /openapi.json serves, kept in the one responses are checked against (document.ts).
   */
  'x-internal'?: true;
  /** How to call it, in curl and with the client library (code-samples.ts adds them; /docs shows them). */
  'x-codeSamples'?: CodeSample[];
}

/** One entry of `x-codeSamples`, the extension Redoc and other renderers read. */
export interface CodeSample {
  lang: string;
  label: string;
  source: string;
}

export type OpenApiPathItem = Partial<Record<'get' | 'post' | 'put' | 'patch' | 'delete', OpenApiOperation>> & {
  parameters?: Array<OpenApiParameter | Ref>;
};

/**
 * One resource's part of the document. document.ts merges every module's maps into `paths`,
 * `webhooks` and `components`; a name defined by two modules is an error at startup.
 */
export interface OpenApiModule {
  tag?: { name: string; description: string };
  paths?: Record<string, OpenApiPathItem>;
  webhooks?: Record<string, OpenApiPathItem>;
  schemas?: Record<string, JsonSchema>;
  responses?: Record<string, Record<string, unknown>>;
  parameters?: Record<string, OpenApiParameter>;
  headers?: Record<string, Record<string, unknown>>;
  securitySchemes?: Record<string, Record<string, unknown>>;
}

/** `#/components/<kind>/<name>`. */
export const ref = (kind: 'schemas' | 'responses' | 'parameters' | 'headers', name: string): Ref => ({ $ref: `#/components/${kind}/${name}` });

/**
 * Our string format for a receiver's url: the WHATWG URL parser (what the dispatcher sends to)
 * reads it as an https URL with a host, and it holds no whitespace or control character.
 */
export const HTTPS_URL_FORMAT = 'https-url';

/**
 * Our extensions on a request body's schema and on each of its properties' schemas: the error
 * code a failure answers with, and what a valid value is ("<name> must be <x-rule>.").
 */
export interface RuleExtensions {
  'x-error-code': 'invalid_body' | 'invalid_url' | 'invalid_events';
  'x-rule': string;
  /** On a request body's schema: at least one of its properties must be given. */
  'x-at-least-one'?: boolean;
}

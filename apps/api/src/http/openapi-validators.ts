import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import * as ajvFormats from 'ajv-formats';
import { InvalidQueryError, ValidationError } from '@svc/core';
import { completeOpenApiDocument as openApiDocument } from '../openapi/document.js';
import { HTTPS_URL_FORMAT, type JsonSchema, type OpenApiOperation, type OpenApiParameter, type OpenApiPathItem, type Ref, type RuleExtensions } from '../openapi/openapi-types.js';

// ajv-formats is CommonJS: under NodeNext its function is the namespace's `default.default`.
const addFormats = ajvFormats.default.default;

/** The id the document is known by inside ajv; validators are JSON pointers into it. */
const DOCUMENT_ID = 'urn:svc:openapi';

/**
 * One ajv (JSON Schema 2020-12, the dialect of OAS 3.1) holding the whole document, so every
 * validator is compiled from the document's own schemas and their $refs resolve as written.
 * The document's top-level sections are not schema keywords: they are declared so strict mode
 * accepts them, and only the fragments asked for are compiled.
 */
const ajv = new Ajv2020({ strict: true, allErrors: false });
addFormats(ajv);
for (const keyword of ['openapi', 'jsonSchemaDialect', 'info', 'servers', 'security', 'tags', 'paths', 'webhooks', 'components', 'x-error-code', 'x-rule', 'x-at-least-one']) {
  ajv.addKeyword({ keyword });
}
ajv.addFormat(HTTPS_URL_FORMAT, isHttpsUrl);
ajv.addSchema(openApiDocument, DOCUMENT_ID, undefined, false);

function isHttpsUrl(value: string): boolean {
  if (/[\s\u0000-\u001f\u007f]/.test(value)) return false;
  try {
    const url = new URL(value);
    return url.protocol === 'https:' && url.hostname !== '';
  } catch {
    return false;
  }
}

/** `a/b` → `a~1b`, as a JSON pointer segment. */
const pointerSegment = (segment: string) => segment.replaceAll('~', '~0').replaceAll('/', '~1');

/** The compiled validator of the schema at a JSON pointer into the document (e.g. `/components/schemas/Scan`). */
export function validatorAt<T = unknown>(pointer: string): ValidateFunction<T> {
  const validate = ajv.getSchema<T>(`${DOCUMENT_ID}#${pointer}`);
  if (!validate) throw new Error(`no schema at ${pointer} in the OpenAPI document`);
  return validate;
}

/** A parameter of an operation with the pointer to its schema in the document. */
interface LocatedParameter {
  parameter: OpenApiParameter;
  schemaPointer: string;
}

function locate(entry: OpenApiParameter | Ref, inlinePointer: string): LocatedParameter {
  if ('$ref' in entry) {
    const name = entry.$ref.replace('#/components/parameters/', '');
    const parameter = openApiDocument.components.parameters[name];
    if (!parameter) throw new Error(`unresolved parameter ${entry.$ref}`);
    return { parameter, schemaPointer: `/components/parameters/${pointerSegment(name)}/schema` };
  }
  return { parameter: entry, schemaPointer: `${inlinePointer}/schema` };
}

/** An operation found by operationId, with its path item and the pointer to it. */
function findOperation(operationId: string): { item: OpenApiPathItem; operation: OpenApiOperation; pointer: string } {
  for (const [path, item] of Object.entries(openApiDocument.paths as Record<string, OpenApiPathItem>)) {
    for (const method of ['get', 'post', 'put', 'patch', 'delete'] as const) {
      const operation: OpenApiOperation | undefined = item[method];
      if (operation?.operationId === operationId) return { item, operation, pointer: `/paths/${pointerSegment(path)}/${method}` };
    }
  }
  throw new Error(`no operation ${operationId} in the OpenAPI document`);
}

/** The parameters of an operation (its path item's and its own), found by operationId. */
export function operationParameters(operationId: string): LocatedParameter[] {
  const { item, operation, pointer } = findOperation(operationId);
  const base = pointer.slice(0, pointer.lastIndexOf('/'));
  return [
    ...(item.parameters ?? []).map((p, i) => locate(p, `${base}/parameters/${i}`)),
    ...(operation.parameters ?? []).map((p, i) => locate(p, `${pointer}/parameters/${i}`)),
  ];
}

/** A named schema of the document (components.schemas) from its $ref, with its pointer. */
function namedSchema(entry: JsonSchema): { schema: JsonSchema & RuleExtensions; pointer: string } {
  const name = String(entry.$ref).replace('#/components/schemas/', '');
  const schema = openApiDocument.components.schemas[name];
  if (!schema || !('x-error-code' in schema) || !('x-rule' in schema)) throw new Error(`schema ${String(entry.$ref)} has no x-error-code and x-rule`);
  return { schema: schema as JsonSchema & RuleExtensions, pointer: `/components/schemas/${pointerSegment(name)}` };
}

/**
 * The body parser of one operation, compiled from its JSON request body schema in the document:
 * an object whose properties are each a named schema. Returns the body, or throws the
 * ValidationError its schemas name (x-error-code, x-rule) for the first bad property in the
 * document's order, or for a body that is not an object. Unknown properties are ignored.
 */
export function validateBody<T extends object>(operationId: string): (body: unknown) => T {
  const { operation } = findOperation(operationId);
  const content = operation.requestBody?.content as Record<string, { schema: JsonSchema }> | undefined;
  const request = namedSchema(content?.['application/json']?.schema ?? {});
  const required = (request.schema.required ?? []) as string[];
  const fields = Object.entries(request.schema.properties as Record<string, JsonSchema>).map(([name, property]) => {
    const { schema, pointer } = namedSchema(property);
    const rule = `${name} must be ${schema['x-rule']}.`;
    // A date-time can match RFC 3339 and still name no instant JavaScript can hold (a leap second), as for queries.
    const instant = schema.format === 'date-time';
    return { name, code: schema['x-error-code'], rule, required: required.includes(name), validate: validatorAt(pointer), instant };
  });
  return (body: unknown) => {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new ValidationError(request.schema['x-error-code'], `The request body must be ${request.schema['x-rule']}.`);
    }
    let given = 0;
    for (const field of fields) {
      const value = Object.hasOwn(body, field.name) ? (body as Record<string, unknown>)[field.name] : undefined;
      if (value === undefined) {
        if (field.required) throw new ValidationError(field.code, `${field.name} is missing; ${field.rule}`);
      } else if (!field.validate(value) || (field.instant && Number.isNaN(Date.parse(String(value))))) {
        throw new ValidationError(field.code, field.rule);
      } else given += 1;
    }
    if (request.schema['x-at-least-one'] === true && given === 0) {
      throw new ValidationError(request.schema['x-error-code'], `The request body must be ${request.schema['x-rule']}.`);
    }
    return body as T;
  };
}

/** Turns a query string value into what its schema types: only plain decimal integers become numbers (no `1e2`, `0x10`, ` 7`, `007`). */
function coerce(raw: string, schema: Record<string, unknown>): unknown {
  if ((schema.type === 'integer' || schema.type === 'number') && /^-?(0|[1-9]\d{0,14})$/.test(raw)) return Number(raw);
  return raw;
}

/**
 * The query parser of one operation, compiled from its `in: query` parameters in the document:
 * returns the typed query with defaults applied, or throws invalid_query naming the first bad
 * parameter in the document's order. Unknown parameters are ignored; a parameter given twice is bad.
 * A `date-time` parameter is also refused when it names no instant, so callers can `new Date()` it.
 */
export function validateQuery<T extends object>(operationId: string): (query: unknown) => T {
  const checks = operationParameters(operationId)
    .filter(({ parameter }) => parameter.in === 'query')
    .map(({ parameter, schemaPointer }) => ({ parameter, validate: validatorAt(schemaPointer) }));
  return (query: unknown) => {
    const raw = (query ?? {}) as Record<string, unknown>;
    const parsed: Record<string, unknown> = {};
    for (const { parameter, validate } of checks) {
      const schema = parameter.schema;
      const value = Object.hasOwn(raw, parameter.name) ? raw[parameter.name] : undefined;
      if (value === undefined) {
        if (parameter.required) throw new InvalidQueryError(parameter.name, `${parameter.name} is missing.`);
        if (schema.default !== undefined) parsed[parameter.name] = schema.default;
        continue;
      }
      const candidate = typeof value === 'string' ? coerce(value, schema) : value;
      // A date-time can match RFC 3339 and still name no instant JavaScript can hold (a leap second).
      const instantless = schema.format === 'date-time' && typeof candidate === 'string' && Number.isNaN(Date.parse(candidate));
      if (!validate(candidate) || instantless) {
        const rule = parameter['x-rule'] ?? `valid: ${validate.errors?.[0]?.message ?? 'see the API reference'}`;
        throw new InvalidQueryError(parameter.name, `${parameter.name} must be ${rule}.`);
      }
      parsed[parameter.name] = candidate;
    }
    return parsed as T;
  };
}

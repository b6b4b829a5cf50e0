import type { RequestError } from 'got';
import { BlockedTargetError } from './ssrf-guard.js';

/**
 * Why an attempt failed, as /metrics counts it: a fixed set, so that no label ever carries what a
 * receiver chose (its status code is folded into its class, its error text is not used).
 * - `dns`: the receiver's name did not resolve (unknown name, or its name servers did not answer);
 * - `connect`: no connection (refused, host or network unreachable);
 * - `reset`: the connection was dropped before an answer (ECONNRESET, EPIPE);
 * - `tls`: the TLS handshake failed (certificate not trusted, expired, not for this name…);
 * - `timeout`: no complete answer within WEBHOOK_TIMEOUT_MS;
 * - `redirect`: a 3xx, never followed;
 * - `too_large`: a 413: the receiver refuses the body as too large for it;
 * - `4xx`, `5xx`: any other status of those classes;
 * - `blocked`: refused by the SSRF guard, nothing sent;
 * - `other`: anything else (a status outside 200–599, an error with no known code).
 */
export const FAILURE_CLASSES = ['dns', 'connect', 'reset', 'tls', 'timeout', 'redirect', 'too_large', '4xx', '5xx', 'blocked', 'other'] as const;
export type FailureClass = (typeof FAILURE_CLASSES)[number];

/** A failed attempt: the delivery log's short description and the class it is counted under. */
export interface AttemptFailure {
  error: string;
  failure: FailureClass;
}

const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'ENODATA', 'ENOTIMP', 'EREFUSED', 'ESERVFAIL', 'EBADNAME']);
const CONNECT_CODES = new Set(['EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'ENETDOWN', 'EADDRNOTAVAIL', 'ECONNABORTED']);
const TLS_CODE = /^(ERR_TLS|CERT_|UNABLE_TO|DEPTH_ZERO|SELF_SIGNED|ERR_SSL|HOSTNAME_MISMATCH)/;

/** A receiver's answer that is not a 2xx; null for a 2xx (delivered). */
export function statusFailure(statusCode: number): AttemptFailure | null {
  if (statusCode >= 200 && statusCode < 300) return null;
  if (statusCode >= 300 && statusCode < 400) return { error: `redirect ${statusCode} not followed`, failure: 'redirect' };
  const error = `HTTP ${statusCode}`;
  if (statusCode === 413) return { error, failure: 'too_large' };
  if (statusCode >= 400 && statusCode < 500) return { error, failure: '4xx' };
  if (statusCode >= 500 && statusCode < 600) return { error, failure: '5xx' };
  return { error, failure: 'other' };
}

/** An attempt that ended without an answer: a short, stable description for the delivery log, and its class. */
export function errorFailure(error: unknown): AttemptFailure {
  if (error instanceof BlockedTargetError) return { error: `blocked: ${error.message}`, failure: 'blocked' };
  const cause = (error as RequestError).cause as (Error & { code?: string }) | undefined;
  if (cause instanceof BlockedTargetError) return { error: `blocked: ${cause.message}`, failure: 'blocked' };
  const code = (error as { code?: string }).code ?? cause?.code;
  if (code === 'ESSRFBLOCKED') return { error: `blocked: ${(error as Error).message}`, failure: 'blocked' };
  if (code === 'ETIMEDOUT') return { error: 'timeout', failure: 'timeout' };
  if (code === 'ECONNREFUSED') return { error: 'connection refused', failure: 'connect' };
  if (code === 'ECONNRESET' || code === 'EPIPE') return { error: 'connection reset', failure: 'reset' };
  if (code !== undefined && DNS_CODES.has(code)) return { error: 'host not found', failure: 'dns' };
  if (code === 'ETIMEOUT') return { error: 'dns timeout', failure: 'dns' };
  if (code && TLS_CODE.test(code)) return { error: `tls error: ${code}`, failure: 'tls' };
  if ((error as Error).name === 'TimeoutError') return { error: 'timeout', failure: 'timeout' };
  const described = `${code ?? 'error'}: ${(error as Error).message}`.slice(0, 300);
  return { error: described, failure: code !== undefined && CONNECT_CODES.has(code) ? 'connect' : 'other' };
}

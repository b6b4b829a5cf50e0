import { CommanderError } from 'commander';
import { ConfigError, DomainError, InputError, NotFoundError, ValidationError } from '@svc/core';

/** Exit codes: 2 when what was typed (or configured) cannot be used, 1 for any other failure. */
export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** True for errors whose message is the whole story, so no stack trace is printed. */
export function isExpectedError(error: unknown): boolean {
  return error instanceof DomainError || error instanceof ConfigError || error instanceof CommanderError;
}

/** The exit code for an error that ended a run. */
export function exitCodeFor(error: unknown): number {
  if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
  if (error instanceof ConfigError) return EXIT_USAGE;
  if (error instanceof InputError || error instanceof ValidationError || error instanceof NotFoundError) return EXIT_USAGE;
  return EXIT_FAILURE;
}

/**
 * One line describing any error. Checks shapes rather than `instanceof Error`, because errors
 * from Node's own modules may come from another realm (test runners); connection failures can
 * arrive as an AggregateError with an empty message, so its inner messages are used instead.
 */
export function describeError(error: unknown): string {
  if (typeof error !== 'object' || error === null) return String(error);
  const { message, errors, code, name } = error as { message?: unknown; errors?: unknown; code?: unknown; name?: unknown };
  if (typeof message === 'string' && message !== '') return message.split('\n')[0] as string;
  const inner = Array.isArray(errors) ? errors.map(describeError).filter(Boolean) : [];
  if (inner.length) return [...new Set(inner)].join('; ');
  if (typeof code === 'string') return code;
  return typeof name === 'string' ? name : String(error);
}

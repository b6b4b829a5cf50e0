import { InvalidArgumentError } from 'commander';

/** A plain decimal number such as 87 or 87.5; no exponents, hex, Infinity or blanks. */
const DECIMAL = /^-?\d+(\.\d+)?$/;

/** Parses a score flag strictly, so that `--score abc` is refused instead of stored as NaN. */
export function parseScore(value: string): number {
  const trimmed = value.trim();
  if (!DECIMAL.test(trimmed)) throw new InvalidArgumentError('It must be a number such as 87 or 87.5.');
  return Number(trimmed);
}

/** `s1,s2` -> ['s1', 's2']; whether each scope exists is core's to decide. */
export function parseScopeList(value: string): string[] {
  return value
    .split(',')
    .map((scope) => scope.trim())
    .filter((scope) => scope !== '');
}

/** Ids and names that must not be blank. */
export function parseText(value: string): string {
  const trimmed = value.trim();
  if (trimmed === '') throw new InvalidArgumentError('It must not be blank.');
  return trimmed;
}

/**
 * A repeatable `NAME=SCORE` flag (`--category Speed=91.5`, `--engine chatgpt=72`): split at the
 * last `=`, so a name may itself hold one; the score is parsed as strictly as --score. Whether the
 * name is acceptable is core's to decide. Returns the list so far with this entry added.
 */
export function collectNamedScore(value: string, previous: Array<{ name: string; score: number }> = []): Array<{ name: string; score: number }> {
  const at = value.lastIndexOf('=');
  if (at <= 0) throw new InvalidArgumentError('It must be NAME=SCORE, such as Speed=91.5.');
  return [...previous, { name: value.slice(0, at), score: parseScore(value.slice(at + 1)) }];
}

/** A whole number of seconds such as 600; no decimals, exponents, signs or blanks. Whether it is in range is core's to decide. */
export function parseSeconds(value: string): number {
  const trimmed = value.trim();
  if (!/^\d{1,9}$/.test(trimmed)) throw new InvalidArgumentError('It must be a whole number of seconds such as 600.');
  return Number(trimmed);
}

/** A whole number such as 500; no decimals, exponents, signs or blanks. Whether it is in range is core's to decide. */
export function parseWholeNumber(value: string): number {
  const trimmed = value.trim();
  if (!/^\d{1,9}$/.test(trimmed)) throw new InvalidArgumentError('It must be a whole number such as 500.');
  return Number(trimmed);
}

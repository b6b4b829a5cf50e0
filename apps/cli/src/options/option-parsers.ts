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

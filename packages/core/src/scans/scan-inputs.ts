import { InputError } from '../errors.js';
import { parseScoreBreakdown } from '../scores/score-breakdown.js';

/** Spec §6.1 speaks of scheduled and manual scans. */
export const SCAN_TRIGGERS = ['scheduled', 'manual'] as const;
export type ScanTrigger = (typeof SCAN_TRIGGERS)[number];

/** One entry of a scan's per-category breakdown. */
export interface ScanCategory {
  name: string;
  score: number;
}

export const CATEGORY_NAME_MAX_LENGTH = 64;

/** Control characters and lone surrogates are not printable; anything else is. */
const NON_PRINTABLE = /[\p{Cc}\p{Cs}]/u;

function isCategoryName(name: string): boolean {
  const length = [...name].length;
  return length >= 1 && length <= CATEGORY_NAME_MAX_LENGTH && !NON_PRINTABLE.test(name) && name.trim() !== '';
}

/** A scan's trigger; `manual` when none is given. */
export function parseScanTrigger(value: unknown): ScanTrigger {
  if (value === undefined) return 'manual';
  if (typeof value !== 'string' || !SCAN_TRIGGERS.includes(value as ScanTrigger)) {
    throw new InputError(`trigger must be one of ${SCAN_TRIGGERS.join(', ')}`);
  }
  return value as ScanTrigger;
}

/** A scan's categories: at most 20, names 1..64 printable characters and unique, scores finite. */
export function parseScanCategories(value: unknown): ScanCategory[] {
  return parseScoreBreakdown(value, {
    label: 'categories',
    keyField: 'name',
    isKey: isCategoryName,
    keyRule: `1 to ${CATEGORY_NAME_MAX_LENGTH} printable characters, not all blank`,
  });
}

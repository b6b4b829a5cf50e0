import { InputError } from '../errors.js';

/** Issue 9: a scan's categories and a run's engines hold at most this many entries. */
export const SCORE_BREAKDOWN_MAX_ENTRIES = 20;

/** How one kind of breakdown names its entries: `name` for scan categories, `engine` for AI Monitor engines. */
interface BreakdownRule<K extends string> {
  /** The input's name in messages: `categories`, `engines`. */
  label: string;
  /** The field that names an entry. */
  keyField: K;
  /** True for an acceptable entry name. */
  isKey(value: string): boolean;
  /** What an acceptable entry name is, for the message. */
  keyRule: string;
}

function isFiniteNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

/**
 * Validates a breakdown before anything is written: an array of at most 20 `{ <key>, score }`,
 * each name acceptable and unique, each score finite. Returns fresh objects holding only those
 * two fields, in the order given.
 */
export function parseScoreBreakdown<K extends string>(value: unknown, rule: BreakdownRule<K>): Array<Record<K, string> & { score: number }> {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw new InputError(`${rule.label} must be an array of { ${rule.keyField}, score }`);
  if (value.length > SCORE_BREAKDOWN_MAX_ENTRIES) {
    throw new InputError(`${rule.label} has ${value.length} entries; at most ${SCORE_BREAKDOWN_MAX_ENTRIES} are allowed`);
  }
  const seen = new Set<string>();
  return value.map((entry: unknown, index) => {
    const at = `${rule.label}[${index}]`;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      throw new InputError(`${at} must be an object { ${rule.keyField}, score }`);
    }
    const key = (entry as Record<string, unknown>)[rule.keyField];
    const score = (entry as Record<string, unknown>).score;
    if (typeof key !== 'string' || !rule.isKey(key)) throw new InputError(`${at}.${rule.keyField} must be ${rule.keyRule}`);
    if (seen.has(key)) throw new InputError(`${at}.${rule.keyField} "${key}" appears twice; each must be unique`);
    seen.add(key);
    if (!isFiniteNumber(score)) throw new InputError(`${at}.score must be a finite number`);
    return { [rule.keyField]: key, score } as Record<K, string> & { score: number };
  });
}

import { parseScoreBreakdown } from '../scores/score-breakdown.js';

/** One entry of an AI Monitor run's per-engine breakdown (spec §2.6, §5). */
export interface EngineScore {
  engine: string;
  score: number;
}

/** An engine id: lower-case letters, digits, `_` and `-`, starting with a letter or digit, at most 32. */
export const ENGINE_ID_PATTERN = /^[a-z0-9][a-z0-9_-]{0,31}$/;

/** A run's engines: at most 20, ids matching ENGINE_ID_PATTERN and unique, scores finite. */
export function parseEngineScores(value: unknown): EngineScore[] {
  return parseScoreBreakdown(value, {
    label: 'engines',
    keyField: 'engine',
    isKey: (id) => ENGINE_ID_PATTERN.test(id),
    keyRule: `an id matching ${ENGINE_ID_PATTERN.source}`,
  });
}

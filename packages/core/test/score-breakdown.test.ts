import { describe, expect, it } from '@jest/globals';
import { parseEngineScores } from '../src/ai-monitor/engine-scores.js';
import { InputError } from '../src/errors.js';
import { parseScanCategories, parseScanTrigger } from '../src/scans/scan-inputs.js';

describe('parseScanCategories', () => {
  it('keeps name and score of each entry, in order, and nothing else', () => {
    expect(parseScanCategories([{ name: 'Speed', score: 1, extra: true }, { name: 'É 🚀', score: -0.5 }])).toEqual([
      { name: 'Speed', score: 1 },
      { name: 'É 🚀', score: -0.5 },
    ]);
    expect(parseScanCategories(undefined)).toEqual([]);
  });

  it('counts a name in characters, so 64 emoji are allowed and 65 are not', () => {
    expect(parseScanCategories([{ name: '🚀'.repeat(64), score: 1 }])).toHaveLength(1);
    expect(() => parseScanCategories([{ name: '🚀'.repeat(65), score: 1 }])).toThrow(InputError);
  });

  it.each([
    ['not an array', { name: 'a', score: 1 }, 'categories must be an array of { name, score }'],
    ['an entry that is not an object', ['a'], 'categories[0] must be an object { name, score }'],
    ['an empty name', [{ name: '', score: 1 }], 'categories[0].name must be 1 to 64 printable characters, not all blank'],
    ['a blank name', [{ name: '   ', score: 1 }], 'categories[0].name must be 1 to 64 printable characters, not all blank'],
    ['a control character', [{ name: 'a\u0007', score: 1 }], 'categories[0].name must be 1 to 64 printable characters, not all blank'],
    ['a lone surrogate', [{ name: 'a\ud800', score: 1 }], 'categories[0].name must be 1 to 64 printable characters, not all blank'],
    ['a NaN score', [{ name: 'a', score: Number.NaN }], 'categories[0].score must be a finite number'],
    ['an infinite score', [{ name: 'a', score: Number.POSITIVE_INFINITY }], 'categories[0].score must be a finite number'],
    ['a score as a string', [{ name: 'a', score: '1' }], 'categories[0].score must be a finite number'],
  ])('refuses %s', (_label, value, message) => {
    expect(() => parseScanCategories(value)).toThrow(new InputError(message));
  });
});

describe('parseEngineScores', () => {
  it.each(['a', '0', 'chatgpt', 'gpt-4o_mini', 'a'.repeat(32)])('accepts the engine id %p', (engine) => {
    expect(parseEngineScores([{ engine, score: 1 }])).toEqual([{ engine, score: 1 }]);
  });

  it.each(['', '-a', '_a', 'ChatGPT', 'a'.repeat(33), 'a b', 'é'])('refuses the engine id %p', (engine) => {
    expect(() => parseEngineScores([{ engine, score: 1 }])).toThrow(InputError);
  });
});

describe('parseScanTrigger', () => {
  it('defaults to manual and refuses anything but scheduled or manual', () => {
    expect(parseScanTrigger(undefined)).toBe('manual');
    expect(parseScanTrigger('scheduled')).toBe('scheduled');
    expect(() => parseScanTrigger('Manual')).toThrow(new InputError('trigger must be one of scheduled, manual'));
  });
});

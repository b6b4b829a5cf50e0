import { describe, expect, it } from '@jest/globals';
import { excerptText, presentResponseExcerpt, storedExcerptOf } from '../src/deliveries/response-excerpt.js';

describe('presentResponseExcerpt: what people see of a receiver’s bytes', () => {
  it('gives readable UTF-8 text and the exact bytes in base64', () => {
    expect(presentResponseExcerpt(Buffer.from('{"ok":"é✓"}'))).toEqual({
      responseExcerpt: '{"ok":"é✓"}',
      responseExcerptBase64: Buffer.from('{"ok":"é✓"}').toString('base64'),
    });
  });

  it('replaces NUL and every invalid UTF-8 sequence with U+FFFD in the text, never in the base64', () => {
    const bytes = Buffer.from([0x6f, 0x6b, 0x00, 0xff, 0xc3, 0x28, 0xed, 0xa0, 0x80, 0xe2, 0x82]);

    const presented = presentResponseExcerpt(bytes);

    expect(presented.responseExcerpt).toBe('ok\uFFFD\uFFFD\uFFFD(\uFFFD\uFFFD\uFFFD\uFFFD');
    expect(presented.responseExcerpt).not.toContain('\u0000');
    expect(Buffer.from(presented.responseExcerptBase64!, 'base64').equals(bytes)).toBe(true);
  });

  it('presents UTF-16 (NUL every other byte) as text without NULs', () => {
    expect(excerptText(Buffer.from('ok', 'utf16le'))).toBe('o\uFFFDk\uFFFD');
  });

  it('keeps "no answer" (null) apart from an empty body ("")', () => {
    expect(presentResponseExcerpt(null)).toEqual({ responseExcerpt: null, responseExcerptBase64: null });
    expect(presentResponseExcerpt(Buffer.alloc(0))).toEqual({ responseExcerpt: '', responseExcerptBase64: '' });
  });

  it('presents a row written before the bytes were kept from its text, and prefers the bytes when both exist', () => {
    expect(presentResponseExcerpt(storedExcerptOf({ response_excerpt: 'busy' }))).toEqual({
      responseExcerpt: 'busy',
      responseExcerptBase64: Buffer.from('busy').toString('base64'),
    });
    expect(storedExcerptOf({ response_excerpt: 'o\uFFFD', response_excerpt_bytes: Buffer.from([0x6f, 0x00]) })).toEqual(Buffer.from([0x6f, 0x00]));
    expect(storedExcerptOf({ response_excerpt: null, response_excerpt_bytes: null })).toBeNull();
  });
});

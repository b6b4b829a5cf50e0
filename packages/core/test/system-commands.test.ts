import { describe, expect, it } from '@jest/globals';
import { requireSystemCommand } from '../src/testing/index.js';

describe('a test that needs a program the machine lacks', () => {
  it('fails with one line naming the Debian package to install', () => {
    let message = '';
    try {
      requireSystemCommand('svc-no-such-program', 'svc-no-such-package', 'a story needs it');
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toBe('svc-no-such-program is missing (a story needs it): apt-get install -y svc-no-such-package');
    expect(message).not.toContain('\n');
  });

  it('goes on quietly when the program is installed', () => {
    expect(() => requireSystemCommand('node', 'nodejs', 'the tests run on it')).not.toThrow();
  });
});

import { describe, expect, it } from '@jest/globals';
import { ConfigError, loadConfig } from '../src/config.js';

describe('METRICS_HOST, the address the unauthenticated metrics port listens on', () => {
  it('is loopback when unset or blank', () => {
    expect(loadConfig({}).metricsHost).toBe('127.0.0.1');
    expect(loadConfig({ METRICS_HOST: '  ' }).metricsHost).toBe('127.0.0.1');
  });

  it.each([
    ['0.0.0.0', '0.0.0.0'],
    ['::', '::'],
    ['[::1]', '::1'],
    [' 192.0.2.7 ', '192.0.2.7'],
  ])('takes the IP address %j as %j', (given, bound) => {
    expect(loadConfig({ METRICS_HOST: given }).metricsHost).toBe(bound);
  });

  it.each(['localhost', 'metrics.example', '0.0.0.0:9464', '256.1.1.1', '*'])('refuses %j with one message naming METRICS_HOST', (given) => {
    let thrown: unknown;
    try {
      loadConfig({ METRICS_HOST: given });
    } catch (error) {
      thrown = error;
    }

    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as ConfigError).variable).toBe('METRICS_HOST');
    expect((thrown as ConfigError).message).toBe(
      `invalid configuration: METRICS_HOST must be an IP address to listen on, such as 127.0.0.1, 0.0.0.0 or :: (got "${given}")`,
    );
  });
});

import { describe, expect, it } from '@jest/globals';
import { runSvc, testEnv } from './support.js';

describe('svc usage', () => {
  it('prints help on stdout and exits 0 for --help', async () => {
    const run = await runSvc(['--help']);

    expect(run.code).toBe(0);
    expect(run.stderr).toBe('');
    for (const group of ['accounts', 'sites', 'keys', 'scans', 'ai-runs', 'power-ups', 'deliveries', 'webhooks', 'portal']) {
      expect(run.stdout).toContain(group);
    }
  });

  it('lists --json among the options of every command', async () => {
    const run = await runSvc(['keys', 'create', '--help']);

    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/--json\s+print exactly one JSON object on stdout/);
    expect(run.stdout).toMatch(/--scopes <scopes>\s+comma-separated scopes among read:sites, read:scans/);
  });

  it('exits 2 with help on stderr when no command is given', async () => {
    const run = await runSvc([]);

    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('Usage: svc');
  });

  it('refuses an unknown command in one line with a suggestion', async () => {
    const run = await runSvc(['acounts', 'create', '--name', 'x']);

    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe("svc: error: unknown command 'acounts' (Did you mean accounts?)\n");
  });

  it('refuses an unknown option naming it', async () => {
    const run = await runSvc(['accounts', 'create', '--name', 'x', '--colour', 'red']);

    expect(run.code).toBe(2);
    expect(run.stderr).toBe("svc: error: unknown option '--colour'\n");
  });

  it('refuses a missing required option naming it, before reading any configuration', async () => {
    const run = await runSvc(['sites', 'add', '--domain', 'example.com'], testEnv({ DATABASE_URL: 'not a url' }));

    expect(run.code).toBe(2);
    expect(run.stderr).toBe("svc: error: required option '--account <accountId>' not specified\n");
  });

  it('refuses a bad configuration in one line naming the variable, with nothing on stdout', async () => {
    const run = await runSvc(['accounts', 'create', '--name', 'x', '--json'], testEnv({ DATABASE_URL: 'not a url' }));

    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe('svc: error: invalid configuration: DATABASE_URL is not a parsable URL\n');
  });

  it('reports an unreachable database in one line with exit 1', async () => {
    const run = await runSvc(['accounts', 'create', '--name', 'x'], testEnv({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/svc_test' }));

    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe('svc: error: connect ECONNREFUSED 127.0.0.1:1\n');
  });
});

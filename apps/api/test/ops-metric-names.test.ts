import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createIsolatedDatabase, freePort, httpGet, TEST_REDIS_URL, uniqueTag, waitFor } from '@svc/core/testing';
import { alertRules, dashboardQueries, metricNamesIn, PROMETHEUS_OWN_METRICS, ROOT } from './ops-files.js';

/** A process started as `npm run start:api` / `start:dispatcher` start it, with its METRICS_PORT. */
interface Running {
  metricsPort: number;
  child: ChildProcess;
  exited: Promise<void>;
  output: () => string;
}

function start(main: string, env: Record<string, string>): Running & { metricsPort: number } {
  let output = '';
  const child = spawn(process.execPath, [join(ROOT, main)], { env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'error', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { metricsPort: Number(env.METRICS_PORT), child, exited, output: () => output };
}

async function stop(running: Running | undefined): Promise<void> {
  if (!running) return;
  if (running.child.pid && running.child.exitCode === null) process.kill(running.child.pid, 'SIGTERM');
  await running.exited;
}

/** What a /metrics scrape declares: each metric's name and type (`# TYPE name type`). */
function exposedTypes(text: string): Map<string, string> {
  const types = new Map<string, string>();
  for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) types.set(name!, type!);
  return types;
}

/** Each label value a scrape's samples carry, as `name{label="value"}`. */
function exposedLabelValues(text: string): Set<string> {
  const values = new Set<string>();
  for (const [, name, labels] of text.matchAll(/^([a-zA-Z_:][\w:]*)\{(.*)\} \S+$/gm)) {
    for (const [, label, value] of labels!.matchAll(/([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"/g)) values.add(`${name}{${label}="${value}"}`);
  }
  return values;
}

/** Labels Prometheus gives a series when it scrapes it: no process exposes them. */
const TARGET_LABELS = new Set(['job', 'instance']);

/**
 * The label values an expression matches on, as `name{label="value"}`: each `=` matcher, and each
 * alternative of a `=~` matcher that only lists plain values (`waiting|prioritized`). Negative
 * matchers and real patterns (`5..`) name no value.
 */
function matchedLabelValues(expr: string): string[] {
  const matched: string[] = [];
  for (const [, name, matchers] of expr.matchAll(/([a-zA-Z_:][\w:]*)\{([^}]*)\}/g)) {
    for (const [, label, op, value] of matchers!.matchAll(/([a-zA-Z_]\w*)\s*(=~|!=|!~|=)\s*"((?:[^"\\]|\\.)*)"/g)) {
      if (TARGET_LABELS.has(label!) || (op !== '=' && op !== '=~')) continue;
      if (op === '=~' && !/^[\w-]+(?:\|[\w-]+)*$/.test(value!)) continue;
      for (const one of op === '=' ? [value!] : value!.split('|')) matched.push(`${name}{${label}="${one}"}`);
    }
  }
  return matched;
}

/** The metric a PromQL name refers to in a scrape: itself, or the histogram a _bucket/_sum/_count series belongs to. */
function exposedAs(name: string, types: Map<string, string>): string | undefined {
  if (types.has(name)) return name;
  const histogram = /^(.*)_(bucket|sum|count)$/.exec(name)?.[1];
  return histogram !== undefined && types.get(histogram) === 'histogram' ? histogram : undefined;
}

describe('every metric the dashboard and the alerts name, against what a running API and dispatcher expose', () => {
  let database: Awaited<ReturnType<typeof createIsolatedDatabase>>;
  let api: Running | undefined;
  let dispatcher: Running | undefined;
  const exposed: { api: Map<string, string>; dispatcher: Map<string, string> } = { api: new Map(), dispatcher: new Map() };
  const labelValues: { api: Set<string>; dispatcher: Set<string> } = { api: new Set(), dispatcher: new Set() };

  beforeAll(async () => {
    // A database of its own: a dispatcher's sweep acts on every due row it can see.
    database = await createIsolatedDatabase();
    const common = { DATABASE_URL: database.url, REDIS_URL: TEST_REDIS_URL, QUEUE_PREFIX: `test-${uniqueTag()}` };
    const apiPort = await freePort();
    api = start('apps/api/dist/src/main.js', { ...common, PORT: String(apiPort), METRICS_PORT: String(await freePort()) });
    dispatcher = start('apps/dispatcher/dist/src/main.js', { ...common, METRICS_PORT: String(await freePort()) });
    for (const [name, running, ready] of [
      ['api', api, `http://127.0.0.1:${apiPort}/readyz`],
      ['dispatcher', dispatcher, `http://127.0.0.1:${dispatcher.metricsPort}/readyz`],
    ] as const) {
      await waitFor(async () => (await httpGet(ready)).status === 200, 30_000, `the ${name} to be ready`).catch((error: Error) => {
        throw new Error(`${error.message}; its output: ${running.output()}`);
      });
      // The scrape's reads of Redis and PostgreSQL wait at most 1 s each and leave their gauge
      // without a sample when they miss it (a loaded machine): poll until the queue gauge has one.
      const text = await waitFor(async () => {
        const scrape = await httpGet(`http://127.0.0.1:${running.metricsPort}/metrics`);
        expect(scrape.status).toBe(200);
        return (name === 'api' || /^svc_dispatcher_queue_jobs\{/m.test(scrape.text)) && scrape.text;
      }, 30_000, `a scrape of the ${name} with every gauge read`);
      exposed[name] = exposedTypes(text);
      labelValues[name] = exposedLabelValues(text);
    }
  }, 90_000);
  afterAll(async () => {
    await Promise.all([stop(api), stop(dispatcher)]);
    await database?.drop();
  });

  /** The names in `queries` that the process their prefix names (either, for Node's own) does not expose. */
  function missing(queries: Array<{ where: string; expr: string }>): string[] {
    const absent: string[] = [];
    for (const { where, expr } of queries) {
      for (const name of metricNamesIn(expr)) {
        if (PROMETHEUS_OWN_METRICS.has(name)) continue;
        const processes = name.startsWith('svc_api_') ? [exposed.api] : name.startsWith('svc_dispatcher_') ? [exposed.dispatcher] : [exposed.api, exposed.dispatcher];
        if (!processes.some((types) => exposedAs(name, types) !== undefined)) absent.push(`${name} (${where})`);
      }
    }
    return absent;
  }

  it('finds each metric of every dashboard query in the /metrics of the process it belongs to', () => {
    const queries = dashboardQueries().map((query) => ({ where: `panel "${query.panel}"`, expr: query.expr }));

    expect(exposed.api.get('svc_api_requests_total')).toBe('counter');
    expect(exposed.dispatcher.get('svc_dispatcher_attempt_lateness_seconds')).toBe('histogram');
    expect(missing(queries)).toEqual([]);
  });

  it('finds each metric of every alert rule likewise (up being Prometheus’s own)', () => {
    const queries = alertRules().map((rule) => ({ where: `alert ${rule.alert}`, expr: rule.expr }));

    expect(missing(queries)).toEqual([]);
  });

  it('finds each label value the alerts and the dashboard match on (state="prioritized", priority="normal", …) on a series the process exposes', () => {
    const queries = [
      ...alertRules().map((rule) => ({ where: `alert ${rule.alert}`, expr: rule.expr })),
      ...dashboardQueries().map((query) => ({ where: `panel "${query.panel}"`, expr: query.expr })),
    ];
    const matched = queries.flatMap(({ where, expr }) => matchedLabelValues(expr).map((value) => ({ where, value })));
    const absent = matched
      .filter(({ value }) => !PROMETHEUS_OWN_METRICS.has(value.slice(0, value.indexOf('{'))))
      .filter(({ value }) => !(value.startsWith('svc_api_') ? [labelValues.api] : value.startsWith('svc_dispatcher_') ? [labelValues.dispatcher] : [labelValues.api, labelValues.dispatcher]).some((values) => values.has(value)))
      .map(({ where, value }) => `${value} (${where})`);

    expect(matched.map(({ value }) => value)).toEqual(expect.arrayContaining(['svc_dispatcher_queue_jobs{state="prioritized"}', 'svc_dispatcher_attempt_lateness_seconds_bucket{priority="normal"}']));
    expect(absent).toEqual([]);
  });
});

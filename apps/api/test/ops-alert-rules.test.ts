import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { stringify } from 'yaml';
import {
  ALERTS_PATH,
  ALERTS_TEST_PATH,
  alertRules,
  alertTestCases,
  asPrometheusQuery,
  dashboardQueries,
  markdownSections,
  metricNamesIn,
  OPERATIONS_PATH,
  promtool,
} from './ops-files.js';

/** A duration of a rule's `for:` in seconds (promtool has already refused anything else). */
function seconds(duration: string): number {
  const units: Record<string, number> = { s: 1, m: 60, h: 3600 };
  return [...duration.matchAll(/(\d+)([smh])/g)].reduce((total, [, n, unit]) => total + Number(n) * units[unit!]!, 0);
}

describe('the alert rules (ops/prometheus/alerts.yml)', () => {
  it('pass promtool check rules', () => {
    const { status, output } = promtool(['check', 'rules', ALERTS_PATH]);

    expect({ status, output }).toEqual({ status: 0, output: expect.stringContaining('SUCCESS') });
  });

  it('pass their unit tests (promtool test rules ops/prometheus/alerts.test.yml)', () => {
    const { status, output } = promtool(['test', 'rules', ALERTS_TEST_PATH]);

    expect({ status, output }).toEqual({ status: 0, output: expect.stringContaining('SUCCESS') });
  });

  it('each have a unit-test case where they fire and one where they do not', () => {
    const cases = alertTestCases().flatMap((testCase) => testCase.alert_rule_test ?? []);
    const untested = alertRules()
      .map((rule) => rule.alert)
      .filter((alert) => {
        const mine = cases.filter((c) => c.alertname === alert);
        return !mine.some((c) => (c.exp_alerts ?? []).length > 0) || !mine.some((c) => (c.exp_alerts ?? []).length === 0);
      });

    expect(alertRules().length).toBeGreaterThanOrEqual(10);
    expect(untested).toEqual([]);
  });

  it('each wait a while before firing, say how bad it is, and link a runbook section of docs/operations.md that says what it means and what to do', () => {
    const sections = markdownSections(readFileSync(OPERATIONS_PATH, 'utf8'));
    for (const rule of alertRules()) {
      const runbook = /^docs\/operations\.md#([\w-]+)$/.exec(rule.annotations?.runbook_url ?? '');
      const section = runbook ? sections.get(runbook[1]!) : undefined;
      expect({ alert: rule.alert, for: seconds(rule.for ?? '0s') >= 60 }).toEqual({ alert: rule.alert, for: true });
      expect({ alert: rule.alert, severity: rule.labels?.severity }).toEqual({ alert: rule.alert, severity: expect.stringMatching(/^(warning|critical)$/) });
      expect({ alert: rule.alert, summary: rule.annotations?.summary, description: rule.annotations?.description }).toEqual({
        alert: rule.alert,
        summary: expect.any(String),
        description: expect.any(String),
      });
      expect({ alert: rule.alert, runbook: section }).toEqual({ alert: rule.alert, runbook: expect.stringMatching(/\*\*What it means\.\*\*[\s\S]*\*\*What to do\.\*\*/) });
    }
  });
});

describe('the Grafana dashboard (ops/grafana/svc-overview.json)', () => {
  it('has only queries Prometheus parses (promtool check rules, each query as a recording rule)', () => {
    const queries = dashboardQueries();
    const dir = mkdtempSync(join(tmpdir(), 'svc-dashboard-'));
    try {
      const file = join(dir, 'dashboard-queries.yml');
      writeFileSync(file, stringify({ groups: [{ name: 'dashboard', rules: queries.map((query, n) => ({ record: `dashboard:query_${n}`, expr: asPrometheusQuery(query.expr) })) }] }));

      const { status, output } = promtool(['check', 'rules', file]);

      expect(queries.length).toBeGreaterThanOrEqual(20);
      expect({ status, output }).toEqual({ status: 0, output: expect.stringContaining(`SUCCESS: ${queries.length} rules found`) });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('has panels for throughput, failures by class, latency, retry lateness, backlog, oldest due age, pools and the API', () => {
    const named = new Set(dashboardQueries().flatMap((query) => metricNamesIn(query.expr)));

    for (const metric of [
      'svc_dispatcher_attempts_total',
      'svc_dispatcher_attempt_failures_total',
      'svc_dispatcher_attempt_duration_seconds_bucket',
      'svc_dispatcher_attempt_lateness_seconds_bucket',
      'svc_dispatcher_queue_jobs',
      'svc_dispatcher_oldest_due_delivery_age_seconds',
      'svc_api_db_pool_connections_in_use',
      'svc_dispatcher_db_pool_connections_in_use',
      'svc_api_requests_total',
      'svc_api_request_duration_seconds_bucket',
    ]) {
      expect(named).toContain(metric);
    }
  });
});

describe('metric names in a PromQL expression', () => {
  it('are the selectors, never functions, keywords, labels, ranges or Grafana variables', () => {
    expect(
      metricNamesIn(
        'histogram_quantile(0.99, sum by (le, route) (rate(svc_x_seconds_bucket{route!~"/healthz|/readyz", le=~"1e3"}[$__rate_interval]))) > 60 ' +
          'and on () sum(rate(svc_y_total[10m] offset 5m)) / ignoring (class) group_left svc_z > bool 1e3 or absent(up{job="a"} == 1)',
      ),
    ).toEqual(['svc_x_seconds_bucket', 'svc_y_total', 'svc_z', 'up']);
  });
});

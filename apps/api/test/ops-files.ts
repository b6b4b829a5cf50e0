import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { requireSystemCommand } from '@svc/core/testing';

/** The repository root (this file runs from apps/api/dist/test). */
export const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
export const ALERTS_PATH = join(ROOT, 'ops/prometheus/alerts.yml');
export const ALERTS_TEST_PATH = join(ROOT, 'ops/prometheus/alerts.test.yml');
export const DASHBOARD_PATH = join(ROOT, 'ops/grafana/svc-overview.json');
export const OPERATIONS_PATH = join(ROOT, 'docs/operations.md');

export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** Every alerting rule of alerts.yml, in order. */
export function alertRules(): AlertRule[] {
  const file = parse(readFileSync(ALERTS_PATH, 'utf8')) as { groups: Array<{ rules: AlertRule[] }> };
  return file.groups.flatMap((group) => group.rules).filter((rule) => rule.alert !== undefined);
}

export interface AlertTestCase {
  name: string;
  alert_rule_test?: Array<{ alertname: string; exp_alerts?: unknown[] }>;
}

/** The promtool unit-test cases of alerts.test.yml. */
export function alertTestCases(): AlertTestCase[] {
  return (parse(readFileSync(ALERTS_TEST_PATH, 'utf8')) as { tests: AlertTestCase[] }).tests;
}

/** Every PromQL expression of the dashboard's panels, with the panel it belongs to. */
export function dashboardQueries(): Array<{ panel: string; expr: string }> {
  const dashboard = JSON.parse(readFileSync(DASHBOARD_PATH, 'utf8')) as { panels: Array<{ title: string; targets?: Array<{ expr?: string }>; panels?: unknown[] }> };
  return dashboard.panels.flatMap((panel) => (panel.targets ?? []).filter((target) => target.expr).map((target) => ({ panel: panel.title, expr: target.expr! })));
}

/** A dashboard query as Prometheus itself would get it: Grafana's range variable replaced. */
export function asPrometheusQuery(expr: string): string {
  return expr.replaceAll('$__rate_interval', '5m');
}

const NOT_METRICS = new Set(['and', 'or', 'unless', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'offset', 'inf', 'nan']);

/**
 * The metric names a PromQL expression selects: identifiers left once strings, label matchers,
 * ranges, grouping label lists and Grafana variables are removed, that are not functions,
 * aggregations or keywords.
 */
export function metricNamesIn(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\$\w+/g, ' ');
  const names = new Set<string>();
  for (const match of bare.matchAll(/(?<![\w.:])[a-zA-Z_:][\w:]*/g)) {
    const rest = bare.slice(match.index! + match[0].length);
    if (/^\s*\(/.test(rest) || NOT_METRICS.has(match[0].toLowerCase())) continue;
    names.add(match[0]);
  }
  return [...names];
}

/** Metrics produced by Prometheus itself, not by the service. */
export const PROMETHEUS_OWN_METRICS = new Set(['up']);

/** promtool, run with `args`: its exit status and what it printed. */
export function promtool(args: string[], cwd = ROOT): { status: number | null; output: string } {
  requireSystemCommand('promtool', 'prometheus', 'the alert rules are checked and unit-tested with it');
  const run = spawnSync('promtool', args, { cwd, encoding: 'utf8', timeout: 60_000 });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

/** GitHub's anchor of a Markdown heading. */
export function headingAnchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The sections of a Markdown document by the anchor of their heading: the text up to the next heading of the same or a higher level. */
export function markdownSections(text: string): Map<string, string> {
  const lines = text.split('\n');
  const sections = new Map<string, string>();
  lines.forEach((line, index) => {
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (!heading) return;
    const level = heading[1]!.length;
    const end = lines.findIndex((next, at) => at > index && /^(#{1,6})\s/.exec(next) !== null && /^(#{1,6})\s/.exec(next)![1]!.length <= level);
    sections.set(headingAnchor(heading[2]!), lines.slice(index + 1, end === -1 ? undefined : end).join('\n'));
  });
  return sections;
}

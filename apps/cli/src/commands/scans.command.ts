import type { Command } from 'commander';
import { completeScan } from '@svc/core';
import { markScanFailed, startScan } from '@svc/core/operator';
import { isoDate } from '../output/command-result.js';
import { collectNamedScore, parseScore, parseText } from '../options/option-parsers.js';
import { addLeafCommand, type CommandKit } from './command-kit.js';

/** `svc scans start|complete|fail`: a scan's life; only completing it fires an event. */
export function registerScansCommands(program: Command, kit: CommandKit): void {
  const scans = program.command('scans').description('scans of a site');

  addLeafCommand<{ site: string; trigger?: string }>(
    scans,
    kit,
    {
      name: 'start',
      description: 'start a scan of a site',
      configure: (c) =>
        c
          .requiredOption('--site <siteId>', 'the site to scan', parseText)
          .option('--trigger <scheduled|manual>', 'who started the scan (default: manual)'),
    },
    async ({ options, resources }) => {
      const scan = await startScan(resources.db(), options.site, { trigger: options.trigger });
      return {
        json: { id: scan.id, status: scan.status, trigger: scan.trigger },
        lines: [`Started ${scan.trigger} scan ${scan.id} of site ${scan.siteId} (${scan.status})`],
      };
    },
  );

  addLeafCommand<{ score: number; category?: Array<{ name: string; score: number }>; idempotencyKey?: string }>(
    scans,
    kit,
    {
      name: 'complete',
      description: 'complete a running scan with its score and optional per-category scores; fires scan.completed',
      configure: (c) =>
        c
          .argument('<scanId>', 'the running scan', parseText)
          .requiredOption('--score <n>', 'the scan’s score', parseScore)
          .option('--category <name=score>', 'a category’s score; repeat for each category (at most 20)', collectNamedScore)
          .option('--idempotency-key <key>', 'names the call: run again with the same key (after a lost connection, say), it records nothing twice and prints what was recorded', parseText),
    },
    async ({ args, options, resources }) => {
      const { scan, eventId } = await completeScan(resources.producerDeps(), {
        scanId: args[0] as string,
        score: options.score,
        categories: options.category ?? [],
        ...(options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey }),
      });
      return {
        json: {
          id: scan.id,
          status: scan.status,
          score: scan.score,
          completedAt: isoDate(scan.completedAt),
          trigger: scan.trigger,
          categories: scan.categories,
          eventId,
        },
        lines: [
          `Completed scan ${scan.id} with score ${scan.score}`,
          ...scan.categories.map((category) => `  ${category.name}: ${category.score}`),
          `  event: ${eventId} (scan.completed)`,
        ],
      };
    },
  );

  addLeafCommand<Record<string, never>>(
    scans,
    kit,
    {
      name: 'fail',
      description: 'mark a running scan failed; fires nothing',
      configure: (c) => c.argument('<scanId>', 'the running scan', parseText),
    },
    async ({ args, resources }) => {
      const scan = await markScanFailed(resources.db(), args[0] as string);
      return {
        json: { id: scan.id, status: scan.status },
        lines: [`Marked scan ${scan.id} failed (no event fired)`],
      };
    },
  );
}

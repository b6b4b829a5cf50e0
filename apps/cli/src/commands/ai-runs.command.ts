import type { Command } from 'commander';
import { completeAiMonitorRun } from '@svc/core';
import { collectNamedScore, parseScore, parseText } from '../options/option-parsers.js';
import { addLeafCommand, type CommandKit } from './command-kit.js';

/** `svc ai-runs complete --site SITE_ID --score N [--engine ID=SCORE]… [--idempotency-key KEY]`: fires ai_check.completed. */
export function registerAiRunsCommands(program: Command, kit: CommandKit): void {
  const aiRuns = program.command('ai-runs').description('AI Monitor runs of a site');

  addLeafCommand<{ site: string; score: number; engine?: Array<{ name: string; score: number }>; idempotencyKey?: string }>(
    aiRuns,
    kit,
    {
      name: 'complete',
      description: 'record a completed AI Monitor run with its composite score; fires ai_check.completed',
      configure: (c) =>
        c
          .requiredOption('--site <siteId>', 'the site the run scored', parseText)
          .requiredOption('--score <n>', 'the run’s composite score', parseScore)
          .option('--engine <id=score>', 'an engine’s score; repeat for each engine (at most 20)', collectNamedScore)
          .option('--idempotency-key <key>', 'names the call: run again with the same key (after a lost connection, say), it records nothing twice and prints what was recorded', parseText),
    },
    async ({ options, resources }) => {
      const { run, eventId } = await completeAiMonitorRun(resources.producerDeps(), {
        siteId: options.site,
        compositeScore: options.score,
        engines: (options.engine ?? []).map((entry) => ({ engine: entry.name, score: entry.score })),
        ...(options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey }),
      });
      return {
        json: { id: run.id, compositeScore: run.compositeScore, engines: run.engines, eventId },
        lines: [
          `Recorded AI Monitor run ${run.id} of site ${run.siteId} with composite score ${run.compositeScore}`,
          ...run.engines.map((entry) => `  ${entry.engine}: ${entry.score}`),
          `  event: ${eventId} (ai_check.completed)`,
        ],
      };
    },
  );
}

import { Command, CommanderError } from 'commander';
import { CliResources, type Env } from './cli-resources.js';
import type { TextSink } from './cli-io.js';
import { describeError, exitCodeFor, isExpectedError } from './cli-errors.js';
import type { CommandKit } from './commands/command-kit.js';
import { registerAccountsCommands } from './commands/accounts.command.js';
import { registerAiRunsCommands } from './commands/ai-runs.command.js';
import { registerDeliveriesCommands } from './commands/deliveries.command.js';
import { registerKeysCommands } from './commands/keys.command.js';
import { registerPortalCommands } from './commands/portal.command.js';
import { registerPowerUpsCommands } from './commands/power-ups.command.js';
import { registerScansCommands } from './commands/scans.command.js';
import { registerSecretsCommands } from './commands/secrets.command.js';
import { registerSitesCommands } from './commands/sites.command.js';
import { registerWebhooksCommands } from './commands/webhooks.command.js';
import { renderResult } from './output/command-result.js';

export interface CliOptions {
  /** The environment to configure from; loadConfig's own default (process.env) when omitted. */
  env?: Env;
  stdout?: TextSink;
  stderr?: TextSink;
}

/** Log levels at which an unexpected error also prints its stack. */
const STACK_LEVELS = new Set(['debug', 'silly']);

/**
 * Runs one `svc` command (argv without `node` and the script) and resolves to its exit code,
 * with every connection it opened closed. It never calls process.exit, so tests run it in-process.
 */
export async function runCli(argv: readonly string[], options: CliOptions = {}): Promise<number> {
  const stdout = options.stdout ?? process.stdout;
  const stderr = options.stderr ?? process.stderr;
  const resources = new CliResources(options.env, stderr);
  let exitCode = 0;
  const kit: CommandKit = {
    resources,
    print: (result, asJson) => {
      stdout.write(renderResult(result, asJson));
      exitCode = result.exitCode ?? 0;
    },
  };
  const program = buildProgram(kit, stdout, stderr);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return exitCode;
  } catch (error) {
    // Commander has already printed its own message (usage errors, help, version).
    if (!(error instanceof CommanderError)) reportError(error, resources, stderr);
    return exitCodeFor(error);
  } finally {
    await resources.close().catch((error: unknown) => {
      stderr.write(`svc: error while closing connections: ${describeError(error)}\n`);
    });
  }
}

function buildProgram(kit: CommandKit, stdout: TextSink, stderr: TextSink): Command {
  const program = new Command('svc')
    .description('Operate the Site Visibility Service: accounts, sites, keys, and the events they fire')
    .exitOverride()
    .configureOutput({
      writeOut: (text) => stdout.write(text),
      writeErr: (text) => stderr.write(text),
      // One line per error: a suggestion ("Did you mean …?") joins the message's line.
      outputError: (text, write) => write(`svc: ${text.trimEnd().replaceAll('\n', ' ')}\n`),
    });
  registerAccountsCommands(program, kit);
  registerSitesCommands(program, kit);
  registerKeysCommands(program, kit);
  registerScansCommands(program, kit);
  registerAiRunsCommands(program, kit);
  registerPowerUpsCommands(program, kit);
  registerWebhooksCommands(program, kit);
  registerDeliveriesCommands(program, kit);
  registerPortalCommands(program, kit);
  registerSecretsCommands(program, kit);
  return program;
}

function reportError(error: unknown, resources: CliResources, stderr: TextSink): void {
  stderr.write(`svc: error: ${describeError(error)}\n`);
  const level = resources.configIfLoaded()?.logLevel;
  const stack = (error as { stack?: unknown } | null)?.stack;
  if (!isExpectedError(error) && typeof stack === 'string' && level && STACK_LEVELS.has(level)) {
    stderr.write(`${stack}\n`);
  }
}

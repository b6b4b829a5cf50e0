import type { Command } from 'commander';
import type { CliResources } from '../cli-resources.js';
import type { CommandResult } from '../output/command-result.js';

/** What every command handler receives: its parsed arguments and options, and the run's resources. */
export interface CommandInput<O> {
  args: string[];
  options: O;
  resources: CliResources;
}

export type CommandHandler<O> = (input: CommandInput<O>) => Promise<CommandResult>;

/** The run's shared pieces: its resources and where a finished command's result goes. */
export interface CommandKit {
  resources: CliResources;
  print(result: CommandResult, asJson: boolean): void;
}

/** Adds a leaf command that accepts `--json` and runs `handler` with the run's resources. */
export function addLeafCommand<O>(
  parent: Command,
  kit: CommandKit,
  spec: { name: string; description: string; configure?: (command: Command) => void },
  handler: CommandHandler<O>,
): Command {
  const command = parent.command(spec.name).description(spec.description);
  spec.configure?.(command);
  command.option('--json', 'print exactly one JSON object on stdout');
  command.action(async () => {
    const options = command.opts<O & { json?: boolean }>();
    const result = await handler({ args: command.processedArgs as string[], options, resources: kit.resources });
    kit.print(result, options.json === true);
  });
  return command;
}

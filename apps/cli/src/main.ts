import { runCli } from './run-cli.js';

// exitCode instead of process.exit: runCli has closed every connection, so the process ends by itself.
process.exitCode = await runCli(process.argv.slice(2));

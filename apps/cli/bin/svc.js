#!/usr/bin/env node
// A committed shim so that npm can link the bin before the build has run. It runs the CLI's
// bundles (apps/cli/scripts/bundle.mjs, made by `npm run build`) through V8 code caches: no
// module resolution and next to no compiling keep a command's start-up CPU low (docs/adr/0010,
// 0012). It is CommonJS (bin/package.json), as is the launcher it requires, so that Node never
// starts its ES module loader for a command (docs/adr/0019).
'use strict';
const { runBundledCli } = require('../dist/src/bundle/launch.cjs');

// exitCode instead of process.exit: runCli has closed every connection, so the process ends by itself.
runBundledCli(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});

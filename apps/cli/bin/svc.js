#!/usr/bin/env node
// A committed shim so that npm can link the bin before the build has run. It runs the CLI's
// esbuild bundle (dist/bundle/svc.cjs, made by `npm run build`: apps/cli/scripts/bundle.mjs).
'use strict';
const { runCli } = require('../dist/bundle/svc.cjs');

// exitCode instead of process.exit: runCli has closed every connection, so the process ends by itself.
runCli(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
